import { MossError } from "../errors.ts";
import { callMembrane } from "../membrane/index.ts";
import type { ExecutionLimits } from "../types.ts";
import { eventLoopAwake, spinMicrosecondsOf } from "./event-loop-awake.ts";
import type { IsolateSession, SessionHost } from "./isolate-session.ts";
import {
  type HostMembrane,
  memoryLimitMebibytes,
  memoryLimitRefusal,
  type SandboxDriver,
  type SandboxRunRequest,
  type SandboxRunResult,
  type SandboxSession,
  type SessionSetupSource,
  setupOf,
} from "./sandbox.ts";
import { WarmIsolates } from "./warm-isolates.ts";

/** Options of the in-process driver. */
export interface InProcessDriverOptions {
  /**
   * Most sessions kept warm (each an isolate with its context). Opening one more evicts the least recently used idle
   * session: its next run rebuilds it from its runtime's persisted context. Default 64.
   */
  maxSessions?: number;
  /**
   * How long this process's event loop keeps polling after a host call or the start of a run instead of sleeping:
   * the isolate's thread waits on it for each call's answer, and waking a sleeping loop costs tens of µs on an idle
   * machine. It costs CPU only for this window after the last call, never while nothing runs, and not at all while
   * the machine has no free core. 0 turns it off. Default 300 µs, at most 5000.
   */
  spinMicroseconds?: number;
}

/**
 * Runs isolates in this process: the fastest driver, but **no crash containment** — model code that aborts V8
 * (e.g. `new Array(1e9).fill(0)`) takes this whole process down. Use the process driver for untrusted code.
 */
export class InProcessDriver implements SandboxDriver {
  readonly name = "in-process" as const;
  readonly #warm = new WarmIsolates("isolate-thread");
  readonly #sessions = new Set<InProcessSession>();
  readonly #maxSessions: number;
  readonly #spinMicroseconds: number;
  readonly #waiters: Array<() => void> = [];
  #closed = false;

  constructor(options: InProcessDriverOptions = {}) {
    this.#maxSessions = Math.max(1, Math.floor(options.maxSessions ?? 64));
    this.#spinMicroseconds = spinMicrosecondsOf(options.spinMicroseconds, "spinMicroseconds");
    void this.#warm.prime().catch(() => {});
  }

  /** Resolves once the warm isolate the first open takes is ready (it is started when the driver is made). */
  async prestart(): Promise<void> {
    await this.#warm.prime().catch(() => {});
  }

  /** Number of sessions holding a warm isolate. */
  get sessionCount(): number {
    return this.#sessions.size;
  }

  async open(
    setup: SessionSetupSource,
    membrane: HostMembrane,
    limits: ExecutionLimits,
  ): Promise<SandboxSession> {
    if (this.#closed) throw new MossError("sandbox-failed", "the in-process sandbox driver is closed");
    await this.#room();
    const spinMicroseconds = this.#spinMicroseconds;
    const host: SessionHost = {
      call: (call) => {
        // The isolate runs on after the answer: its next call (or its end) is likely close behind.
        eventLoopAwake.awake(spinMicroseconds);
        return callMembrane(membrane, call);
      },
    };
    // A new isolate under a memory limit, with the session's setup as the runtime gives it now.
    const build = async (memoryLimit: number): Promise<IsolateSession> => {
      const isolate = await this.#warm.take(memoryLimit);
      try {
        await isolate.install(await setupOf(setup), host);
      } catch (error) {
        isolate.dispose();
        throw new MossError(
          "sandbox-failed",
          `could not install the session: ${(error as Error)?.message ?? error}`,
          {},
          { cause: error },
        );
      }
      return isolate;
    };
    const isolate = await build(memoryLimitMebibytes(limits.memoryLimitBytes));
    const session = new InProcessSession(isolate, spinMicroseconds, {
      disposed: () => {
        this.#sessions.delete(session);
        this.#freed();
      },
      ran: () => this.#freed(),
      // Only a session opened with a setup function can be rebuilt from its runtime's data as they are now.
      rebuild: typeof setup === "function" ? build : undefined,
    });
    this.#sessions.add(session);
    return session;
  }

  /**
   * Makes room for one more session: evicts the least recently used session that is not running (it rebuilds on its
   * next run), or waits (bounded) until one is.
   */
  async #room(): Promise<void> {
    while (this.#sessions.size >= this.#maxSessions) {
      let victim: InProcessSession | undefined;
      for (const session of this.#sessions) {
        if (session.running) continue;
        if (victim === undefined || session.lastUsed < victim.lastUsed) victim = session;
      }
      if (victim !== undefined) {
        await victim.dispose();
        continue;
      }
      if (this.#waiters.length >= MAX_WAITING_OPENS) {
        throw new MossError(
          "queue-full",
          `all ${this.#maxSessions} sandbox sessions (maxSessions) are running and ${this.#waiters.length} wait for one; try again later`,
        );
      }
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
      if (this.#closed) throw new MossError("sandbox-failed", "the in-process sandbox driver is closed");
    }
  }

  /** A run ended or a session left: opens waiting for room try again. */
  #freed(): void {
    for (const resolve of this.#waiters.splice(0)) resolve();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#freed();
    await Promise.all([...this.#sessions].map((session) => session.dispose()));
    await this.#warm.close();
  }
}

/** Most opens waiting for an in-process session to become evictable. */
const MAX_WAITING_OPENS = 1_000;

class InProcessSession implements SandboxSession {
  #isolate: IsolateSession;
  readonly #events: {
    disposed(): void;
    ran(): void;
    rebuild: ((memoryLimit: number) => Promise<IsolateSession>) | undefined;
  };
  readonly #spinMicroseconds: number;
  #disposed = false;

  constructor(
    isolate: IsolateSession,
    spinMicroseconds: number,
    events: {
      disposed(): void;
      ran(): void;
      rebuild: ((memoryLimit: number) => Promise<IsolateSession>) | undefined;
    },
  ) {
    this.#isolate = isolate;
    this.#spinMicroseconds = spinMicroseconds;
    this.#events = events;
  }

  get alive(): boolean {
    return !this.#disposed && this.#isolate.alive;
  }

  /** When the session last ran (eviction picks the least recently used). */
  lastUsed = performance.now();
  /** Running, or opened for a run not yet begun (not evicted meanwhile). */
  running = true;

  async run(request: SandboxRunRequest): Promise<SandboxRunResult> {
    this.lastUsed = performance.now();
    this.running = true;
    try {
      // An isolate's memory limit is fixed when it is made: a run asking for another gets a new isolate of its
      // session, under its own limit (rebuilt from the runtime's data), or is refused; never the old limit silently.
      const wanted = memoryLimitMebibytes(request.limits.memoryLimitBytes);
      if (wanted !== this.#isolate.memoryLimitMebibytes && this.#isolate.alive) {
        const rebuild = this.#events.rebuild;
        if (rebuild === undefined) {
          throw memoryLimitRefusal(this.#isolate.memoryLimitMebibytes, request.limits.memoryLimitBytes);
        }
        this.#isolate.dispose();
        try {
          this.#isolate = await rebuild(wanted);
        } catch (error) {
          throw new MossError(
            "sandbox-failed",
            `the run did not start: its session could not be rebuilt under its memory limit (${(error as Error)?.message ?? error})`,
            { notStarted: true },
            { cause: error },
          );
        }
        if (this.#disposed) {
          this.#isolate.dispose();
          throw new MossError(
            "sandbox-failed",
            "the sandbox session was disposed before its run started",
            {},
          );
        }
      }
      eventLoopAwake.awake(this.#spinMicroseconds);
      return await this.#isolate.run(request);
    } finally {
      this.running = false;
      this.lastUsed = performance.now();
      this.#events.ran();
    }
  }

  stop(message: string): void {
    this.#isolate.stop(message);
  }

  async dispose(): Promise<void> {
    this.#disposed = true;
    this.#isolate.dispose();
    this.#events.disposed();
  }
}
