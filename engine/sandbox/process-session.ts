import { MossError } from "../errors.ts";
import { crashResult } from "./crash-result.ts";
import {
  type HostMembrane,
  memoryLimitMebibytes,
  memoryLimitRefusal,
  type SandboxRunRequest,
  type SandboxRunResult,
  type SandboxSession,
  type SessionSetupSource,
  setupOf,
} from "./sandbox.ts";
import { NotStarted, type SandboxChild } from "./sandbox-child.ts";

/** What a session asks of the driver whose processes hold it. */
export interface SessionPool {
  /** Moves runs waiting behind another session's run to idle processes. */
  balance(): void;
  /** A run ended or a session left: sessions waiting for a slot try again. */
  slotFreed(): void;
  /** A session left its process: a process left with no session ends. */
  released(child: SandboxChild): void;
}

/**
 * A session of the process driver: its isolate lives in one sandbox process (`child`) until it is evicted, moved or
 * lost with its process; a run then rebuilds it from its runtime's data.
 */
export class ProcessSession implements SandboxSession {
  readonly id: number;
  readonly membrane: HostMembrane;
  readonly #setup: SessionSetupSource;
  readonly #driver: SessionPool;
  child: SandboxChild | undefined;
  /** When the session last ran (eviction picks the least recently used). */
  lastUsed = performance.now();
  #runs = 0;
  /** Opened for a run that has not begun: not evicted meanwhile. */
  #fresh = true;
  #disposed = false;
  /** The memory limit its isolate was made with (in MiB, fixed for that isolate). */
  memoryMebibytes = 0;

  constructor(id: number, membrane: HostMembrane, setup: SessionSetupSource, driver: SessionPool) {
    this.id = id;
    this.membrane = membrane;
    this.#setup = setup;
    this.#driver = driver;
  }

  /** Whether the session can be rebuilt elsewhere from its runtime's current data (opened with a setup function). */
  get movable(): boolean {
    return typeof this.#setup === "function";
  }

  get alive(): boolean {
    return !this.#disposed && this.child !== undefined && !this.child.exited;
  }

  /** Whether a run of this session is in flight or waiting, or the session was opened for a run not yet begun. */
  get running(): boolean {
    return this.#runs > 0 || this.#fresh;
  }

  async run(request: SandboxRunRequest): Promise<SandboxRunResult> {
    if (this.#runs > 0) {
      throw new MossError("concurrent-execute", "a run is already in progress in this sandbox session");
    }
    const child = this.child;
    if (!this.alive || child === undefined) return crashResult("the sandbox session is no longer alive");
    this.#runs++;
    this.#fresh = false;
    this.lastUsed = performance.now();
    try {
      // An isolate's memory limit is fixed when it is made: a run asking for another gets a new isolate of its
      // session in the same process, under its own limit (rebuilt from the runtime's data), or is refused.
      if (memoryLimitMebibytes(request.limits.memoryLimitBytes) !== this.memoryMebibytes) {
        if (!this.movable) throw memoryLimitRefusal(this.memoryMebibytes, request.limits.memoryLimitBytes);
        await this.#reopen(child, request.limits.memoryLimitBytes);
      }
      const result = child.run(this, request);
      // Waiting behind another session's run: a process with nothing to do takes this run instead.
      if (child.waiting > 0) this.#driver.balance();
      return await result;
    } catch (error) {
      if (error instanceof NotStarted) {
        throw new MossError(
          "sandbox-failed",
          `the run did not start: its sandbox process ended first (${error.message})`,
          { notStarted: true },
        );
      }
      throw error;
    } finally {
      this.#runs--;
      this.lastUsed = performance.now();
      this.#driver.slotFreed();
    }
  }

  stop(message: string): void {
    this.child?.stopRun(this, message);
  }

  /** Rebuilds the session in another process, from its runtime's data as they are now (its run waits meanwhile). */
  async moveTo(target: SandboxChild, memoryLimitBytes: number): Promise<void> {
    const home = this.child;
    this.child = target;
    if (home !== undefined) {
      home.closeSession(this);
      this.#driver.released(home);
    }
    try {
      await target.open(this, setupOf(this.#setup), memoryLimitBytes);
    } catch (error) {
      this.child = undefined;
      throw error;
    }
  }

  /** Rebuilds the session's isolate in its own process under another memory limit (its data as they are now). */
  async #reopen(child: SandboxChild, memoryLimitBytes: number): Promise<void> {
    child.closeSession(this);
    try {
      await child.open(this, setupOf(this.#setup), memoryLimitBytes);
    } catch (error) {
      this.child = undefined;
      this.#driver.released(child);
      throw new NotStarted((error as Error)?.message ?? String(error));
    }
  }

  /** The process dropped this session's isolate (it died, or the process ended). */
  lost(): void {
    this.child = undefined;
  }

  /** Drops the isolate to make room; the runtime rebuilds the session on its next run. */
  evict(): void {
    const child = this.child;
    this.child = undefined;
    if (child === undefined) return;
    child.closeSession(this);
    this.#driver.released(child);
  }

  /** Ends the session: its isolate goes, and its process too when no other session is left there. */
  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    const child = this.child;
    this.child = undefined;
    if (child === undefined) return;
    child.closeSession(this);
    if (child.sessions.size === 0) {
      this.#driver.released(child);
      await child.stop("disposed");
    }
  }
}
