import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import type { Duplex } from "node:stream";
import { fileURLToPath } from "node:url";
import { MossError } from "../errors.ts";
import { runnableEntry } from "../runnable-entry.ts";
import type { ExecutionLimits } from "../types.ts";
import { crashResult } from "./crash-result.ts";
import {
  type CallReply,
  type ChildMessage,
  type HostCall,
  LineChannel,
  type ParentMessage,
} from "./line-channel.ts";
import { callMembrane, errorWire } from "./membrane-call.ts";
import type {
  HostMembrane,
  SandboxDriver,
  SandboxRunRequest,
  SandboxRunResult,
  SandboxSession,
  SessionSetup,
} from "./sandbox.ts";

/** Options of the process driver. */
export interface ProcessDriverOptions {
  /** Spare ready sandbox processes kept warm; each session takes one for its whole life. Default 2. */
  poolSize?: number;
  /** Extra time past a run's wall-time limit before a silent sandbox process is killed. Default 2000 ms. */
  unresponsiveGraceMs?: number;
  /** Time a sandbox process may take to start and report ready. Default 30000 ms. */
  startTimeoutMs?: number;
}

const entryFile = fileURLToPath(
  new URL(import.meta.url.endsWith(".ts") ? "./sandbox-process.ts" : "./sandbox-process.js", import.meta.url),
);
let childEntry: string | undefined;

/**
 * The sandbox process's entry as plain JavaScript. From TypeScript sources, the entry and its few imports are
 * bundled once per process with esbuild (isolated-vm kept external, loaded as the host loads it) into a
 * content-addressed file in the temp folder: starting a child then costs no TypeScript loader (≈ 0.5 s saved per
 * start or replacement) and no loader helpers leak into the function sources evaluated in the isolate.
 */
function sandboxEntry(): string {
  // isolated-vm (any alias) stays outside the bundle; the loader (isolated-vm.ts) requires it relative to
  // `import.meta.url`, so the bundle keeps the entry's location and resolves exactly as the host does.
  childEntry ??= runnableEntry(entryFile, {
    external: ["isolated-vm", "isolated-vm-*"],
    importMetaUrl: "entry",
  });
  return childEntry;
}

/**
 * Node ≤ 20 ships resizable/growable buffers behind a harmony flag that we turn off; Node 22+ ships them and rejects
 * the flag at start-up (exit 9). The bootstrap makes them impossible on every line either way.
 */
const RAB_GSAB_FLAG = "--no-harmony-rab-gsab";

/** Whether this Node line accepts `--no-harmony-rab-gsab` (Node 22+ exits with code 9 when given it). */
export function acceptsRabGsabFlag(version = process.versions.node): boolean {
  return Number(version.split(".")[0]) < 22;
}

function childArguments(): string[] {
  return ["--no-node-snapshot", ...(acceptsRabGsabFlag() ? [RAB_GSAB_FLAG] : []), sandboxEntry()];
}

/** Delay before a spare taken by a session is replaced. */
const REFILL_DELAY_MS = 500;

/** Why a run's sandbox process was killed by its supervisor (absent: it died by itself). */
type KillReason = "timeout" | "memory" | "disposed" | "stopped";

const MEBIBYTE = 1024 * 1024;

/**
 * How much a sandbox process may grow during a run past its size when the run started, beyond twice its isolate's
 * memory limit. isolated-vm stops an isolate at its limit by an interrupt, which code inside one long V8 builtin
 * never services (`new Array(1e9).fill(0)` fills a dictionary in C++): isolated-vm then lends V8 another GiB and the
 * process grows to over 1 GiB before V8 aborts it, which takes longer than the wall-time limit under load on
 * Node 24+. Nothing a live isolate within its limit holds (heap, its young generation, array buffers, compiler
 * memory) comes near this, so a process past it is out of memory and is killed at once.
 */
const MEMORY_SLACK_BYTES = 256 * MEBIBYTE;

/** How often the supervisor reads a running sandbox process's resident size. */
const MEMORY_POLL_MS = 100;

/** A process's resident set size in bytes (Linux `/proc`); undefined where it cannot be read (other systems). */
function residentBytes(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match === null ? undefined : Number(match[1]) * 1024;
  } catch {
    return undefined;
  }
}

/**
 * What V8 prints when it aborts a process for lack of memory: Node's handler ("JavaScript heap out of memory",
 * "invalid table size Allocation failed") or, for an isolated-vm isolate, V8's own report ("is_heap_oom = 1").
 */
const OUT_OF_MEMORY =
  /out of memory|heap limit|Allocation failed|is_heap_oom = 1|invalid (table|array) (size|length)/i;

/**
 * One supervised sandbox process, owned by at most one session for its whole life: model code in it can end,
 * crash or stall only that session's run. Idle, it does not keep the host's event loop alive.
 */
class SandboxChild {
  readonly process: ChildProcess;
  readonly ready: Promise<void>;
  readonly #channel: LineChannel<ChildMessage, ParentMessage>;
  readonly #calls: LineChannel<HostCall, CallReply>;
  readonly #streams: Array<{ ref(): unknown; unref(): unknown }>;
  #membrane: HostMembrane | undefined;
  #run:
    | {
        resolve(result: SandboxRunResult): void;
        timer: NodeJS.Timeout;
        memoryWatch: NodeJS.Timeout | undefined;
        limits: ExecutionLimits;
      }
    | undefined;
  #opening: { resolve(): void; reject(error: Error): void } | undefined;
  #isReady = false;
  #holds = 0;
  #sessionDied = false;
  #outOfMemory = false;
  #referenced = true;
  #exited = false;
  #killReason: KillReason | undefined;
  #stderrTail = "";
  #memoryLimitBytes = 0;
  /** The resident size that made the memory watch kill the process. */
  #killedAtBytes = 0;
  #nextPromiseId = 1;
  #onReady!: () => void;
  #onStartFailed!: (error: Error) => void;
  readonly #onExit: (child: SandboxChild) => void;
  readonly #graceMs: number;

  constructor(options: { graceMs: number; startTimeoutMs: number; onExit: (child: SandboxChild) => void }) {
    this.#graceMs = options.graceMs;
    this.#onExit = options.onExit;
    this.process = spawn(process.execPath, childArguments(), {
      stdio: ["ignore", "inherit", "pipe", "pipe", "pipe"],
    });
    this.ready = new Promise<void>((resolve, reject) => {
      this.#onReady = resolve;
      this.#onStartFailed = reject;
    });
    this.ready.catch(() => {});
    const startTimer = setTimeout(() => {
      this.#onStartFailed(
        new MossError(
          "sandbox-failed",
          `the sandbox process did not start within ${options.startTimeoutMs} ms`,
        ),
      );
      this.kill("stopped");
    }, options.startTimeoutMs);
    startTimer.unref();
    this.ready.then(
      () => clearTimeout(startTimer),
      () => clearTimeout(startTimer),
    );
    this.process.stderr!.setEncoding("utf8");
    this.process.stderr!.on("data", (chunk: string) => {
      // Scanned as it arrives: V8 follows its out-of-memory line with kilobytes of heap statistics.
      if (OUT_OF_MEMORY.test(this.#stderrTail.slice(-200) + chunk)) this.#outOfMemory = true;
      this.#stderrTail = (this.#stderrTail + chunk).slice(-4000);
    });
    const control = this.process.stdio[3] as Duplex;
    const calls = this.process.stdio[4] as Duplex;
    this.#channel = new LineChannel<ChildMessage, ParentMessage>(control, (message) => this.#handle(message));
    this.#calls = new LineChannel<HostCall, CallReply>(calls, (call) => this.#answer(call));
    control.on("error", () => {});
    calls.on("error", () => {});
    this.#streams = [this.process, control, calls, this.process.stderr!] as unknown as Array<{
      ref(): unknown;
      unref(): unknown;
    }>;
    // "close", not "exit": V8's last words (an out-of-memory report) arrive on stderr just before the pipes close.
    this.process.on("close", (code, signal) => this.#exit(code, signal));
    this.process.on("error", (error) => {
      this.#onStartFailed(
        new MossError(
          "sandbox-failed",
          `could not start the sandbox process: ${error.message}`,
          {},
          { cause: error },
        ),
      );
      this.#exit(null, null);
    });
    // Idle (starting or spare) it must not keep the host alive: held only while someone waits on it.
    this.#hold(false);
  }

  get exited(): boolean {
    return this.#exited;
  }

  get isReady(): boolean {
    return this.#isReady && !this.#exited;
  }

  /** Whether the process reported ready at some point (a spare that dies later is replaced at once). */
  get readyOnce(): boolean {
    return this.#isReady;
  }

  /** False once the process exited or its session's isolate died. */
  get usable(): boolean {
    return !this.#exited && !this.#sessionDied;
  }

  get running(): boolean {
    return this.#run !== undefined;
  }

  /** Kills the process; a run in flight ends with the kind the reason names (or from its stderr). */
  kill(reason: KillReason): void {
    if (this.#exited) return;
    this.#killReason ??= reason;
    this.process.kill("SIGKILL");
  }

  /** Kills the process and waits until it is gone. */
  async stop(reason: KillReason = "stopped"): Promise<void> {
    if (this.#exited) return;
    const exited = new Promise<void>((resolve) => this.process.once("close", () => resolve()));
    this.#hold(true);
    this.kill(reason);
    try {
      await exited;
    } finally {
      this.#hold(false);
    }
  }

  /** Waits until the process is ready, holding the event loop meanwhile. */
  async whenReady(): Promise<void> {
    this.#hold(true);
    try {
      await this.ready;
    } finally {
      this.#hold(false);
    }
  }

  /** Opens the one session this process will ever hold. */
  async open(setup: SessionSetup, membrane: HostMembrane, memoryLimitBytes: number): Promise<void> {
    this.#membrane = membrane;
    this.#memoryLimitBytes = memoryLimitBytes;
    this.#hold(true);
    try {
      await this.ready;
      const opened = new Promise<void>((resolve, reject) => {
        this.#opening = { resolve, reject };
      });
      this.#send({ type: "open", session: 1, setup, memoryLimitBytes });
      await opened;
    } finally {
      this.#opening = undefined;
      this.#hold(false);
    }
  }

  run(request: SandboxRunRequest): Promise<SandboxRunResult> {
    return new Promise<SandboxRunResult>((resolve) => {
      const limits = request.limits;
      const timer = setTimeout(() => {
        this.#stderrTail += `\n(no answer ${limits.wallTimeMs + this.#graceMs} ms into a run)`;
        this.kill("timeout");
      }, limits.wallTimeMs + this.#graceMs);
      this.#run = { resolve, timer, memoryWatch: this.#watchMemory(), limits };
      this.#hold(true);
      this.#send({ type: "run", session: 1, request });
    });
  }

  /**
   * Supervises the run's memory from outside, as the timer does its time: a process grown past its isolate's limit
   * by more than isolated-vm lets a live isolate hold is killed (kind `memory`). Not where `/proc` is missing.
   */
  #watchMemory(): NodeJS.Timeout | undefined {
    const pid = this.process.pid;
    const start = residentBytes(pid);
    if (start === undefined) return undefined;
    const ceiling = start + 2 * this.#memoryLimitBytes + MEMORY_SLACK_BYTES;
    return setInterval(() => {
      const resident = residentBytes(pid);
      if (resident === undefined || resident <= ceiling) return;
      this.#killedAtBytes = resident;
      this.kill("memory");
    }, MEMORY_POLL_MS);
  }

  #send(message: ParentMessage): void {
    if (!this.#exited) this.#channel.send(message);
  }

  /** Counts what is in flight (waiting for ready, an open, a run): the process holds the event loop only then. */
  #hold(held: boolean): void {
    this.#holds = Math.max(0, this.#holds + (held ? 1 : -1));
    const referenced = this.#holds > 0 && !this.#exited;
    if (referenced === this.#referenced) return;
    this.#referenced = referenced;
    for (const stream of this.#streams) {
      try {
        if (referenced) stream.ref();
        else stream.unref();
      } catch {}
    }
  }

  #handle(message: ChildMessage): void {
    switch (message.type) {
      case "result": {
        const run = this.#run;
        if (run === undefined) return;
        clearTimeout(run.timer);
        clearInterval(run.memoryWatch);
        this.#run = undefined;
        this.#hold(false);
        // A session whose isolate died is not reopened in this process: the next open takes a fresh one.
        if (!message.alive) {
          this.#sessionDied = true;
          this.kill("stopped");
        }
        run.resolve(message.result);
        return;
      }
      case "opened":
        this.#opening?.resolve();
        return;
      case "open-failed":
        this.#opening?.reject(
          new MossError("sandbox-failed", `could not open a sandbox session: ${message.message}`),
        );
        return;
      case "ready":
        this.#isReady = true;
        this.#onReady();
        return;
    }
  }

  #answer(call: HostCall): void {
    const membrane = this.#membrane;
    const outcome =
      membrane === undefined
        ? { kind: "error" as const, wire: errorWire(new Error("the session is closed")) }
        : callMembrane(membrane, call.operation, call.handle, call.member, call.args, call.line);
    if (outcome.kind !== "promise") {
      this.#reply(outcome);
      return;
    }
    const promiseId = this.#nextPromiseId++;
    this.#reply({ kind: "promise", promiseId });
    outcome.settled.then(
      (settled) =>
        this.#send(
          settled.kind === "pending"
            ? { type: "settle", promiseId, kind: "pending" }
            : { type: "settle", promiseId, kind: settled.kind, wire: settled.wire },
        ),
      (error: unknown) => this.#send({ type: "settle", promiseId, kind: "error", wire: errorWire(error) }),
    );
  }

  #reply(reply: CallReply): void {
    if (!this.#exited) this.#calls.send(reply);
  }

  /** The result of the run in flight when the process died: named by its cause. */
  #deathResult(message: string): SandboxRunResult {
    if (this.#outOfMemory) {
      const result = crashResult(
        `the run ran out of memory and V8 aborted its sandbox process (${message})`,
        "RangeError",
      );
      result.error!.kind = "memory";
      return result;
    }
    if (this.#killReason === "memory") {
      const result = crashResult(
        `the run exceeded its memory limit of ${Math.round(this.#memoryLimitBytes / MEBIBYTE)} MiB and did not stop when interrupted; its sandbox process grew to ${Math.round(this.#killedAtBytes / MEBIBYTE)} MiB and was killed`,
        "RangeError",
      );
      result.error!.kind = "memory";
      return result;
    }
    if (this.#killReason === "timeout") {
      const limits = this.#run!.limits;
      const result = crashResult(
        `the run exceeded its time limit (wall ${limits.wallTimeMs} ms, CPU ${limits.cpuTimeMs} ms) and did not stop when interrupted; its sandbox process was killed`,
        "TimeoutError",
      );
      result.error!.kind = "timeout";
      return result;
    }
    if (this.#killReason === "disposed")
      return crashResult("the sandbox session was disposed during the run");
    return crashResult(message, "SandboxCrash");
  }

  #exit(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#exited) return;
    this.#exited = true;
    const how = signal !== null ? `was killed by ${signal}` : `exited with code ${code}`;
    const stderr = this.#stderrTail.trim();
    const detail = stderr.split("\n").slice(-3).join(" | ");
    const message = `the sandbox process ${how}${detail === "" ? "" : ` (${detail})`}`;
    this.#onStartFailed(new MossError("sandbox-failed", message));
    this.#opening?.reject(new MossError("sandbox-failed", message));
    const run = this.#run;
    if (run !== undefined) {
      clearTimeout(run.timer);
      clearInterval(run.memoryWatch);
      const result = this.#deathResult(message);
      this.#run = undefined;
      run.resolve(result);
    }
    this.#membrane = undefined;
    this.#onExit(this);
  }
}

/**
 * The default driver: every session owns one supervised sandbox process for its whole life, taken from a warm pool
 * of spare ready processes (each with a primed isolate) that refills in the background. Model code that aborts V8,
 * spins or stalls ends only its own run; the host never dies. Host calls cross the process boundary to the
 * membrane in this process.
 */
export class ProcessDriver implements SandboxDriver {
  readonly name = "process" as const;
  readonly #poolSize: number;
  readonly #graceMs: number;
  readonly #startTimeoutMs: number;
  readonly #spares: SandboxChild[] = [];
  readonly #owned = new Set<SandboxChild>();
  #closed = false;
  #refill: NodeJS.Timeout | undefined;

  constructor(options: ProcessDriverOptions = {}) {
    this.#poolSize = Math.max(1, options.poolSize ?? 2);
    this.#graceMs = options.unresponsiveGraceMs ?? 2_000;
    this.#startTimeoutMs = options.startTimeoutMs ?? 30_000;
  }

  /** Process ids of the running sandbox processes, spares and owned ones (for supervision and tests). */
  get pids(): number[] {
    return [...this.#spares, ...this.#owned]
      .filter((child) => !child.exited)
      .map((child) => child.process.pid!);
  }

  /** Process ids of the spare (not yet owned) sandbox processes. */
  get sparePids(): number[] {
    return this.#spares.filter((child) => !child.exited).map((child) => child.process.pid!);
  }

  /** Starts the pool of spares (done lazily by `open`); resolves when every spare is ready. */
  async start(): Promise<void> {
    this.#fill();
    await Promise.all(this.#spares.map((child) => child.whenReady()));
  }

  async open(setup: SessionSetup, membrane: HostMembrane, limits: ExecutionLimits): Promise<SandboxSession> {
    if (this.#closed) throw new MossError("sandbox-failed", "the process sandbox driver is closed");
    // No spare at all (the first open, or a burst): start just the one this open needs; the pool refills later.
    if (this.#spares.length === 0) this.#fill(1);
    const index = this.#spares.findIndex((child) => child.isReady);
    const child = this.#spares.splice(index === -1 ? 0 : index, 1)[0]!;
    this.#owned.add(child);
    this.#scheduleRefill();
    try {
      await child.open(setup, membrane, limits.memoryLimitBytes);
    } catch (error) {
      await child.stop();
      throw error;
    }
    return new ProcessSession(child);
  }

  /**
   * Starting a process costs a few hundred ms of CPU: the replacement starts a moment later, so it does not compete
   * with the session just handed out (its open and first run). An open that finds no spare starts one at once.
   */
  #scheduleRefill(): void {
    if (this.#refill !== undefined || this.#closed) return;
    this.#refill = setTimeout(() => {
      this.#refill = undefined;
      this.#fill();
    }, REFILL_DELAY_MS);
    this.#refill.unref();
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#refill);
    const children = [...this.#spares, ...this.#owned];
    this.#spares.length = 0;
    this.#owned.clear();
    await Promise.all(children.map((child) => child.stop("disposed")));
  }

  #fill(count = this.#poolSize): void {
    while (!this.#closed && this.#spares.length < count) {
      const child: SandboxChild = new SandboxChild({
        graceMs: this.#graceMs,
        startTimeoutMs: this.#startTimeoutMs,
        onExit: () => {
          this.#owned.delete(child);
          const index = this.#spares.indexOf(child);
          if (index === -1) return;
          this.#spares.splice(index, 1);
          // A spare that died after starting well is replaced at once; one that never started is replaced on the
          // next open, so a machine that cannot start sandbox processes does not spawn in a loop.
          if (child.readyOnce) this.#fill();
        },
      });
      this.#spares.push(child);
    }
  }
}

class ProcessSession implements SandboxSession {
  readonly #child: SandboxChild;
  #disposed = false;

  constructor(child: SandboxChild) {
    this.#child = child;
  }

  get alive(): boolean {
    return !this.#disposed && this.#child.usable;
  }

  run(request: SandboxRunRequest): Promise<SandboxRunResult> {
    if (this.#child.running) {
      return Promise.reject(
        new MossError("concurrent-execute", "a run is already in progress in this sandbox session"),
      );
    }
    if (!this.alive) return Promise.resolve(crashResult("the sandbox session is no longer alive"));
    return this.#child.run(request);
  }

  /** Ends the session's sandbox process (a run in flight ends with kind `crash`). */
  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    await this.#child.stop("disposed");
  }
}
