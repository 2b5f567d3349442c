import { type ChildProcess, spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import type { Duplex } from "node:stream";
import { fileURLToPath } from "node:url";
import { MossError } from "../errors.ts";
import { answerInOrder, callMembrane, checkBatch, errorWire, type HostOutcome } from "../membrane/index.ts";
import { runnableEntry } from "../runnable-entry.ts";
import type { ExecutionLimits } from "../types.ts";
import { abortedResult, crashResult } from "./crash-result.ts";
import { eventLoopAwake, spinMicrosecondsOf } from "./event-loop-awake.ts";
import {
  type CallReply,
  type ChildMessage,
  type HostCallBatch,
  LineChannel,
  type ParentMessage,
  type SessionCall,
} from "./line-channel.ts";
import {
  type HostMembrane,
  memoryLimitMebibytes,
  memoryLimitRefusal,
  type SandboxDriver,
  type SandboxRunRequest,
  type SandboxRunResult,
  type SandboxSession,
  type SessionSetup,
  type SessionSetupSource,
  setupOf,
} from "./sandbox.ts";

/** Options of the process driver. */
export interface ProcessDriverOptions {
  /** Spare ready sandbox processes kept warm, ahead of demand. Default 2. */
  poolSize?: number;
  /**
   * Most sandbox processes alive at once, spares included. Sessions spread over them; once every process is taken,
   * sessions share processes (each still in its own isolate and context). Default: twice the cores, at least 4.
   */
  maxProcesses?: number;
  /**
   * Most sessions one sandbox process keeps warm (each an isolate with its context, about 1–2 MiB). When every slot
   * is taken, the least recently used idle session is evicted: its next run rebuilds it from its runtime's persisted
   * context. Default 64.
   */
  sessionsPerProcess?: number;
  /**
   * Resident size past which a sandbox process keeps no more sessions warm: each session opened there evicts its
   * least recently used idle session first. Bounds the warm sessions by what they hold, not only by their count.
   * Default 512 MiB.
   */
  processMemoryBytes?: number;
  /** Most runs waiting for one sandbox process (it runs one at a time); one more fails with `queue-full`. Default 64. */
  maxQueuedRuns?: number;
  /** Extra time past a run's wall-time limit before a silent sandbox process is killed. Default 2000 ms. */
  unresponsiveGraceMs?: number;
  /** Time a sandbox process may take to start and report ready. Default 30000 ms. */
  startTimeoutMs?: number;
  /**
   * How long a side of the membrane polls for what it expects next instead of sleeping: a sandbox process polls its
   * call pipe for a host call's reply (and its event loop for settlements), and this process's event loop keeps
   * polling after each call and message. Waking a sleeping thread costs tens of µs per crossing on an idle machine;
   * polling costs CPU only for this window after the last crossing, never while nothing crosses. 0 turns it off.
   * Default 300 µs, at most 5000.
   */
  spinMicroseconds?: number;
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

function childArguments(spinMicroseconds: number): string[] {
  return [
    "--no-node-snapshot",
    ...(acceptsRabGsabFlag() ? [RAB_GSAB_FLAG] : []),
    sandboxEntry(),
    String(spinMicroseconds),
  ];
}

/**
 * How long a run must have been in flight before the runs waiting behind it in its process move to an idle process.
 * A move rebuilds the session there (a new isolate and its setup: ~5 ms of CPU on an idle machine, several times that
 * under load), so runs wait behind a short run and leave a long one (a spinner) at once after this.
 */
const MOVE_AFTER_MS = 20;

/** Places tried by one open whose process ends while the session opens there. */
const OPEN_ATTEMPTS = 2;

/** Delay before a spare taken by a session is replaced. */
const REFILL_DELAY_MS = 500;

/** Why a run's sandbox process was killed by its supervisor (absent: it died by itself). */
type KillReason = "timeout" | "memory" | "disposed" | "stopped" | "invalid-message";

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

/**
 * A process's resident set size in bytes (Linux `/proc`), read without blocking the host's thread; undefined where it
 * cannot be read (other systems, a process that ended).
 */
async function readResidentBytes(pid: number | undefined): Promise<number | undefined> {
  if (pid === undefined) return undefined;
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(await readFile(`/proc/${pid}/status`, "utf8"));
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

/** A run of a session, waiting for its sandbox process or in flight there. */
interface ChildRun {
  readonly session: ProcessSession;
  readonly request: SandboxRunRequest;
  resolve(result: SandboxRunResult): void;
  reject(error: Error): void;
  timer?: NodeJS.Timeout;
  memoryWatch?: NodeJS.Timeout | undefined;
  /** When the run started in its process. */
  startedAt: number;
  /** Fires when the run becomes long: the runs waiting behind it may then move. */
  longTimer?: NodeJS.Timeout;
}

/**
 * One supervised sandbox process: it keeps the isolates of up to `sessionsPerProcess` sessions warm and runs one of
 * them at a time (the others' runs wait in a bounded queue). Model code in it can end, crash or stall only the run
 * in flight; the other sessions it held lose their isolate and rebuild elsewhere on their next run. Idle, it does not
 * keep the host's event loop alive.
 */
class SandboxChild {
  readonly process: ChildProcess;
  readonly ready: Promise<void>;
  /** The sessions whose isolate lives here, by id. */
  readonly sessions = new Map<number, ProcessSession>();
  readonly #channel: LineChannel<ChildMessage, ParentMessage>;
  readonly #calls: LineChannel<SessionCall | HostCallBatch, CallReply | CallReply[]>;
  readonly #streams: Array<{ ref(): unknown; unref(): unknown }>;
  #run: ChildRun | undefined;
  readonly #queue: ChildRun[] = [];
  readonly #opening = new Map<number, { resolve(): void; reject(error: Error): void }>();
  #isReady = false;
  /** Sessions being opened here (a new one, or one moved here with its run): the process is spoken for. */
  #arriving = 0;
  #holds = 0;
  #outOfMemory = false;
  #referenced = true;
  #exited = false;
  #killReason: KillReason | undefined;
  /** Why a message of the process was refused (with kill reason "invalid-message"). */
  #invalidMessage = "";
  #stderrTail = "";
  /** The resident size that made the memory watch kill the process. */
  #killedAtBytes = 0;
  /**
   * The process's resident size as last read (`refreshResidentBytes`: when it became ready and after each open and
   * run, off the host's thread); undefined until read, or where `/proc` is missing.
   */
  residentBytes: number | undefined;
  #readingResident: Promise<void> | undefined;
  #rereadResident = false;
  #nextPromiseId = 1;
  #onReady!: () => void;
  #onStartFailed!: (error: Error) => void;
  readonly #onExit: (child: SandboxChild) => void;
  readonly #onEmpty: (child: SandboxChild) => void;
  readonly #onRebalance: (child: SandboxChild) => void;
  readonly #graceMs: number;
  readonly #maxQueuedRuns: number;
  readonly #spinMicroseconds: number;

  constructor(options: {
    graceMs: number;
    spinMicroseconds: number;
    startTimeoutMs: number;
    maxQueuedRuns: number;
    onExit: (child: SandboxChild) => void;
    /** The last session left (its isolate died): the driver ends a process that holds nothing. */
    onEmpty: (child: SandboxChild) => void;
    /**
     * The process became ready or finished its runs (a run waiting elsewhere may move here), or its run in flight
     * became long (the runs waiting behind it may move elsewhere): the driver rebalances.
     */
    onRebalance: (child: SandboxChild) => void;
  }) {
    this.#onEmpty = options.onEmpty;
    this.#onRebalance = options.onRebalance;
    this.#graceMs = options.graceMs;
    this.#maxQueuedRuns = options.maxQueuedRuns;
    this.#onExit = options.onExit;
    this.#spinMicroseconds = options.spinMicroseconds;
    this.process = spawn(process.execPath, childArguments(options.spinMicroseconds), {
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
    this.#channel = new LineChannel<ChildMessage, ParentMessage>(
      control,
      (message) => this.#handle(message),
      {
        frames: true,
        onInvalid: (error) => {
          this.#invalidMessage = error.message;
          this.kill("invalid-message");
        },
      },
    );
    this.#calls = new LineChannel<SessionCall | HostCallBatch, CallReply | CallReply[]>(
      calls,
      (call) => ("batch" in call ? this.#answerBatch(call) : this.#answer(call)),
      {
        onInvalid: (error) => {
          this.#invalidMessage = error.message;
          this.kill("invalid-message");
        },
      },
    );
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

  /** Whether a run is in flight or waiting here, or a session is being opened here. */
  get busy(): boolean {
    return this.#run !== undefined || this.#queue.length > 0 || this.#arriving > 0;
  }

  /**
   * How many runs wait here behind a long run (in flight for MOVE_AFTER_MS or more) that another process could take.
   * Behind a short run they stay: it ends sooner than their session could be rebuilt elsewhere.
   */
  get waiting(): number {
    const run = this.#run;
    if (run === undefined || performance.now() - run.startedAt < MOVE_AFTER_MS) return 0;
    return this.#queue.filter((queued) => queued.session.movable).length;
  }

  /**
   * Takes the run that has waited longest here of a session that can move (one opened from its runtime's data), to
   * run it in another process.
   */
  takeWaiting(): ChildRun | undefined {
    if (this.waiting === 0) return undefined;
    const index = this.#queue.findIndex((run) => run.session.movable);
    if (index === -1) return undefined;
    const run = this.#queue.splice(index, 1)[0]!;
    this.#hold(false);
    return run;
  }

  /** Queues a run taken from another process, once its session has been moved here. */
  enqueue(run: ChildRun): void {
    if (this.#exited) {
      run.reject(new NotStarted("the sandbox process it moved to ended"));
      return;
    }
    this.#queue.push(run);
    this.#hold(true);
    this.#next();
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

  /** Opens a session in a fresh isolate of this process. */
  async open(
    session: ProcessSession,
    setup: SessionSetup | Promise<SessionSetup>,
    memoryLimitBytes: number,
  ): Promise<void> {
    // The process is spoken for before anything is awaited (the setup may still be compiling its definitions).
    this.sessions.set(session.id, session);
    this.#arriving++;
    this.#hold(true);
    try {
      await this.ready;
      const given = await setup;
      const opened = new Promise<void>((resolve, reject) => {
        this.#opening.set(session.id, { resolve, reject });
      });
      this.#send({ type: "open", session: session.id, setup: given, memoryLimitBytes });
      await opened;
      session.memoryMebibytes = memoryLimitMebibytes(memoryLimitBytes);
    } catch (error) {
      this.sessions.delete(session.id);
      throw error;
    } finally {
      this.#opening.delete(session.id);
      this.#arriving--;
      this.#hold(false);
    }
  }

  /**
   * Ends a session's run at once with kind `aborted`: one in flight is ended by its process (which discards the
   * isolate, as after a timeout); one still waiting here never starts.
   */
  stopRun(session: ProcessSession, message: string): void {
    if (this.#run?.session === session) {
      this.#send({ type: "stop", session: session.id, message });
      return;
    }
    for (let index = this.#queue.length - 1; index >= 0; index--) {
      const queued = this.#queue[index]!;
      if (queued.session !== session) continue;
      this.#queue.splice(index, 1);
      this.#hold(false);
      queued.resolve(abortedResult(message));
    }
  }

  /** Drops a session's isolate (disposed, or evicted to make room); a run of it in flight ends with kind `crash`. */
  closeSession(session: ProcessSession): void {
    if (!this.sessions.delete(session.id)) return;
    for (let index = this.#queue.length - 1; index >= 0; index--) {
      const queued = this.#queue[index]!;
      if (queued.session !== session) continue;
      this.#queue.splice(index, 1);
      queued.resolve(crashResult("the sandbox session was disposed before its run started"));
    }
    if (this.#run?.session === session) {
      // The isolate is mid-run on this process's thread: only killing the process stops it.
      this.kill("disposed");
      return;
    }
    this.#send({ type: "dispose", session: session.id });
  }

  /** Runs a session's script once the runs queued before it are done. */
  run(session: ProcessSession, request: SandboxRunRequest): Promise<SandboxRunResult> {
    if (this.#queue.length >= this.#maxQueuedRuns) {
      return Promise.reject(
        new MossError(
          "queue-full",
          `the sandbox process already has ${this.#queue.length} runs waiting (the limit, maxQueuedRuns); try again later`,
          { queued: this.#queue.length },
        ),
      );
    }
    return new Promise<SandboxRunResult>((resolve, reject) => {
      this.#queue.push({ session, request, resolve, reject, startedAt: 0 });
      this.#hold(true);
      this.#next();
    });
  }

  #next(): void {
    if (this.#run !== undefined || this.#exited) return;
    const run = this.#queue.shift();
    if (run === undefined) return;
    const limits = run.request.limits;
    run.timer = setTimeout(() => {
      this.#stderrTail += `\n(no answer ${limits.wallTimeMs + this.#graceMs} ms into a run)`;
      this.kill("timeout");
    }, limits.wallTimeMs + this.#graceMs);
    run.memoryWatch = this.#watchMemory(limits.memoryLimitBytes, run);
    run.startedAt = performance.now();
    run.longTimer = setTimeout(() => {
      if (this.#run === run && this.#queue.length > 0) this.#onRebalance(this);
    }, MOVE_AFTER_MS);
    run.longTimer.unref();
    this.#run = run;
    this.#send({ type: "run", session: run.session.id, request: run.request });
    eventLoopAwake.awake(this.#spinMicroseconds);
  }

  /**
   * Supervises the run's memory from outside, as the timer does its time: a process grown past its isolate's limit
   * by more than isolated-vm lets a live isolate hold is killed (kind `memory`). Reads `/proc` asynchronously every
   * `MEMORY_POLL_MS`; not on systems without it.
   */
  #watchMemory(memoryLimitBytes: number, run: ChildRun): NodeJS.Timeout | undefined {
    if (process.platform !== "linux") return undefined;
    // From the size as last read (after the last open or run here), or the first read if none is known yet.
    const headroom = 2 * memoryLimitBytes + MEMORY_SLACK_BYTES;
    let ceiling = this.residentBytes === undefined ? undefined : this.residentBytes + headroom;
    return setInterval(() => {
      void this.refreshResidentBytes().then(() => {
        const resident = this.residentBytes;
        if (this.#run !== run || resident === undefined) return;
        ceiling ??= resident + headroom;
        if (resident <= ceiling) return;
        this.#killedAtBytes = resident;
        this.kill("memory");
      });
    }, MEMORY_POLL_MS);
  }

  /**
   * Reads the process's resident size into `residentBytes`, asynchronously (a read asked for while one is under way
   * reads again after it, so the value is never older than the request). Resolves once it is read.
   */
  refreshResidentBytes(): Promise<void> {
    if (this.#exited) return Promise.resolve();
    if (this.#readingResident !== undefined) {
      this.#rereadResident = true;
      return this.#readingResident;
    }
    const read = async (): Promise<void> => {
      do {
        this.#rereadResident = false;
        const bytes = await readResidentBytes(this.process.pid);
        if (bytes !== undefined) this.residentBytes = bytes;
      } while (this.#rereadResident && !this.#exited);
    };
    this.#readingResident = read().finally(() => {
      this.#readingResident = undefined;
    });
    return this.#readingResident;
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
        if (run === undefined || run.session.id !== message.session) return;
        clearTimeout(run.timer);
        clearTimeout(run.longTimer);
        clearInterval(run.memoryWatch);
        this.#run = undefined;
        this.#hold(false);
        // A session whose isolate died is gone from this process (the child dropped it); its runtime opens anew.
        if (!message.alive) {
          this.sessions.delete(run.session.id);
          run.session.lost();
        }
        run.resolve(message.result);
        void this.refreshResidentBytes();
        this.#next();
        if (this.sessions.size === 0) this.#onEmpty(this);
        else if (!this.busy) this.#onRebalance(this);
        return;
      }
      case "opened":
        this.#opening.get(message.session)?.resolve();
        void this.refreshResidentBytes();
        return;
      case "open-failed":
        this.#opening
          .get(message.session)
          ?.reject(new MossError("sandbox-failed", `could not open a sandbox session: ${message.message}`));
        return;
      case "ready":
        this.#isReady = true;
        void this.refreshResidentBytes();
        this.#onReady();
        this.#onRebalance(this);
        return;
    }
  }

  #answer(call: SessionCall): void {
    const membrane = this.#membraneOf(call.session);
    const outcome =
      membrane === undefined
        ? { kind: "error" as const, wire: errorWire(new Error("the session is closed")) }
        : callMembrane(membrane, call);
    this.#reply(this.#callReply(outcome));
  }

  /** A batch of calls (`HostBatchBridge`): answered in order as `answerInOrder` says, replied to in one line. */
  #answerBatch(call: HostCallBatch): void {
    const membrane = this.#membraneOf(call.session);
    let outcomes: HostOutcome[];
    try {
      if (membrane === undefined) throw new Error("the session is closed");
      outcomes = answerInOrder(checkBatch(call.batch), (batched) => callMembrane(membrane, batched));
    } catch (error) {
      outcomes = [{ kind: "error", wire: errorWire(error) }];
    }
    this.#reply(outcomes.map((outcome) => this.#callReply(outcome)));
  }

  /** Only the session whose run is in flight may reach its membrane. */
  #membraneOf(id: number): HostMembrane | undefined {
    const session = this.sessions.get(id);
    return this.#run?.session === session ? session?.membrane : undefined;
  }

  /** A call's outcome as it crosses the pipe: a promise is named by an id, its settlement sent later on fd 3. */
  #callReply(outcome: HostOutcome): CallReply {
    if (outcome.kind !== "promise") return outcome;
    const promiseId = this.#nextPromiseId++;
    outcome.settled.then(
      (settled) =>
        this.#send(
          settled.kind === "pending"
            ? { type: "settle", promiseId, kind: "pending" }
            : { type: "settle", promiseId, kind: settled.kind, wire: settled.wire },
        ),
      (error: unknown) => this.#send({ type: "settle", promiseId, kind: "error", wire: errorWire(error) }),
    );
    return { kind: "promise", promiseId };
  }

  #reply(reply: CallReply | CallReply[]): void {
    if (this.#exited) return;
    this.#calls.send(reply);
    // The isolate runs on after the reply: its next call (or its result) is likely close behind.
    eventLoopAwake.awake(this.#spinMicroseconds);
  }

  /** The result of the run in flight when the process died: named by its cause. */
  #deathResult(run: ChildRun, message: string): SandboxRunResult {
    if (this.#outOfMemory) {
      const result = crashResult(
        `the run ran out of memory and V8 aborted its sandbox process (${message})`,
        "RangeError",
      );
      result.error!.kind = "memory";
      return result;
    }
    const limits = run.request.limits;
    if (this.#killReason === "memory") {
      const result = crashResult(
        `the run exceeded its memory limit of ${Math.round(limits.memoryLimitBytes / MEBIBYTE)} MiB and did not stop when interrupted; its sandbox process grew to ${Math.round(this.#killedAtBytes / MEBIBYTE)} MiB and was killed`,
        "RangeError",
      );
      result.error!.kind = "memory";
      return result;
    }
    if (this.#killReason === "timeout") {
      const result = crashResult(
        `the run exceeded its time limit (wall ${limits.wallTimeMs} ms, CPU ${limits.cpuTimeMs} ms) and did not stop when interrupted; its sandbox process was killed`,
        "TimeoutError",
      );
      result.error!.kind = "timeout";
      return result;
    }
    if (this.#killReason === "disposed")
      return crashResult("the sandbox session was disposed during the run");
    if (this.#killReason === "invalid-message") {
      return crashResult(
        `the sandbox process sent a message the host refuses (${this.#invalidMessage}); it was killed`,
        "SandboxCrash",
      );
    }
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
    for (const opening of this.#opening.values()) opening.reject(new MossError("sandbox-failed", message));
    const run = this.#run;
    this.#run = undefined;
    if (run !== undefined) {
      clearTimeout(run.timer);
      clearTimeout(run.longTimer);
      clearInterval(run.memoryWatch);
      run.resolve(this.#deathResult(run, message));
    }
    // Runs of other sessions that never started here: their sessions rebuild elsewhere and run then.
    for (const queued of this.#queue.splice(0)) queued.reject(new NotStarted(message));
    for (const session of this.sessions.values()) session.lost();
    this.sessions.clear();
    this.#onExit(this);
  }
}

/** A run that never started because its session's process died meanwhile (the session rebuilds and runs it then). */
class NotStarted extends Error {}

/**
 * The default driver: a bounded pool of supervised sandbox processes shared by every session, refilled ahead of
 * demand with spare ready processes (each with a primed isolate). Sessions spread over the processes, each in its own
 * isolate and context; a process runs one session at a time. Model code that aborts V8, spins or stalls ends only its
 * own run; the host never dies. Host calls cross the process boundary to the membrane in this process.
 */
export class ProcessDriver implements SandboxDriver {
  readonly name = "process" as const;
  readonly #poolSize: number;
  readonly #maxProcesses: number;
  readonly #sessionsPerProcess: number;
  readonly #processMemoryBytes: number;
  readonly #maxQueuedRuns: number;
  readonly #graceMs: number;
  readonly #startTimeoutMs: number;
  readonly #spinMicroseconds: number;
  readonly #spares: SandboxChild[] = [];
  /** The next spare taken was started by `prestart`: the pool refills after a delay, not at once. */
  #refillLater = false;
  /** Processes holding sessions. */
  readonly #active = new Set<SandboxChild>();
  #closed = false;
  #refill: NodeJS.Timeout | undefined;
  #nextSession = 1;
  readonly #slotWaiters: Array<() => void> = [];

  constructor(options: ProcessDriverOptions = {}) {
    this.#maxProcesses = Math.max(
      1,
      Math.floor(options.maxProcesses ?? Math.max(4, 2 * availableParallelism())),
    );
    this.#poolSize = Math.min(this.#maxProcesses, Math.max(1, options.poolSize ?? 2));
    this.#sessionsPerProcess = Math.max(1, Math.floor(options.sessionsPerProcess ?? 64));
    this.#processMemoryBytes = options.processMemoryBytes ?? 512 * MEBIBYTE;
    this.#maxQueuedRuns = Math.max(1, Math.floor(options.maxQueuedRuns ?? 64));
    this.#graceMs = options.unresponsiveGraceMs ?? 2_000;
    this.#startTimeoutMs = options.startTimeoutMs ?? 30_000;
    this.#spinMicroseconds = spinMicrosecondsOf(options.spinMicroseconds, "spinMicroseconds");
  }

  /** Process ids of the running sandbox processes, spares and ones holding sessions (for supervision and tests). */
  get pids(): number[] {
    return [...this.#spares, ...this.#active]
      .filter((child) => !child.exited)
      .map((child) => child.process.pid!);
  }

  /** Process ids of the spare (holding no session) sandbox processes. */
  get sparePids(): number[] {
    return this.#spares.filter((child) => !child.exited).map((child) => child.process.pid!);
  }

  /** Starts the pool of spares (done lazily by `open`); resolves when every spare is ready. */
  async start(): Promise<void> {
    this.#fill();
    await Promise.all(this.#spares.map((child) => child.whenReady()));
  }

  /**
   * Starts one spare now if no process is starting or running: the first open then takes it, and the pool refills
   * after a delay, as after a first open without a spare (a one-shot run has ended by then). Resolves once the
   * spares are ready.
   */
  async prestart(): Promise<void> {
    if (this.#spares.length === 0 && this.#active.size === 0) {
      this.#fill(1);
      this.#refillLater = true;
    }
    await Promise.all(this.#spares.map((child) => child.whenReady()));
  }

  async open(
    setup: SessionSetupSource,
    membrane: HostMembrane,
    limits: ExecutionLimits,
  ): Promise<SandboxSession> {
    for (let attempt = 1; ; attempt++) {
      if (this.#closed) throw new MossError("sandbox-failed", "the process sandbox driver is closed");
      const child = await this.#place();
      const session = new ProcessSession(this.#nextSession++, membrane, setup, this);
      session.child = child;
      try {
        await child.open(session, setupOf(setup), limits.memoryLimitBytes);
        return session;
      } catch (error) {
        session.lost();
        this.slotFreed();
        if (child.sessions.size === 0 && this.#active.delete(child)) await child.stop();
        // Its process ended during the open (another session's run there crashed it): open elsewhere, once.
        if (!child.exited || attempt >= OPEN_ATTEMPTS) throw error;
      }
    }
  }

  /**
   * The process a new session goes to: a process of its own while the pool has room and a spare is ready (the spare
   * is replaced at once, ahead of the next open), else a live process with no run that holds fewer than its even
   * share of the sessions (opening an isolate there costs milliseconds, starting a process hundreds; the least
   * recently used idle session there is evicted when it is full), else a starting spare while the pool has room;
   * else it waits until a process finishes its run.
   */
  async #place(): Promise<SandboxChild> {
    for (;;) {
      const child = this.#placeNow();
      if (child !== undefined) return child;
      // Every process is running, or every slot holds a session that is: wait (bounded) until a run ends.
      if (this.#slotWaiters.length >= this.#maxQueuedRuns) {
        throw new MossError(
          "queue-full",
          `every sandbox slot (${this.#maxProcesses} processes × ${this.#sessionsPerProcess} sessions) holds a running session and ${this.#slotWaiters.length} sessions wait for one (the limit, maxQueuedRuns); try again later`,
        );
      }
      await new Promise<void>((resolve) => this.#slotWaiters.push(resolve));
      if (this.#closed) throw new MossError("sandbox-failed", "the process sandbox driver is closed");
    }
  }

  /** A run ended or a session left: sessions waiting for a slot try again. */
  slotFreed(): void {
    for (const resolve of this.#slotWaiters.splice(0)) resolve();
  }

  #placeNow(): SandboxChild | undefined {
    const live = [...this.#active].filter((child) => !child.exited);
    const idle = this.#idleProcess(this.#evenShare(live));
    if (idle !== undefined) {
      // Shared for want of a ready spare: the pool grows toward maxProcesses now, so later sessions spread out
      // (a run waiting behind a long run moves to a process with nothing to do, and there must be some).
      if (live.length < this.#maxProcesses) this.#replaceSpare();
      this.#refillLater = false;
      return idle;
    }
    if (live.length < this.#maxProcesses) {
      // No ready spare. None at all (the first open, a one-shot script): start just the one this open needs; the pool
      // refills a moment later, off the critical path.
      if (this.#spares.length === 0) this.#fill(1);
      const child = this.#spares.shift()!;
      this.#active.add(child);
      this.#scheduleRefill();
      this.#refillLater = false;
      return child;
    }
    // Every process is running a session's run: the open waits for one to finish. Opened in a busy process, the
    // session would wait for that run (a spinner's, to its limit) before its isolate even exists.
    return undefined;
  }

  /**
   * How many sessions a process may hold before a new session goes to a process of its own: the sessions spread
   * evenly over the most processes the pool may hold. Packed into the few processes that happened to be ready, the
   * sessions of one would all wait behind a long run there and then each be rebuilt elsewhere (issue 17: 20 trivial
   * executes beside a spinner took up to 1 s). Unbounded once the pool is full.
   */
  #evenShare(live: SandboxChild[]): number {
    if (live.length >= this.#maxProcesses) return Number.POSITIVE_INFINITY;
    const held = live.reduce((sum, child) => sum + child.sessions.size, 0);
    return Math.ceil((held + 1) / this.#maxProcesses);
  }

  /**
   * A ready process with no run in flight or waiting that can take one more session: a ready spare while the pool
   * has room (replaced at once), else a process holding fewer than `share` sessions (after evicting an idle one if
   * it is full, by count or by memory).
   */
  #idleProcess(share = Number.POSITIVE_INFINITY): SandboxChild | undefined {
    const spare = this.#readySpare();
    if (spare !== undefined) return spare;
    const idle = [...this.#active].filter(
      (child) => child.isReady && !child.busy && child.sessions.size < share,
    );
    idle.sort((a, b) => a.sessions.size - b.sessions.size);
    for (const child of idle) {
      // Opens placed at the same moment may have filled it past the bound: evict down to one free slot.
      while (child.sessions.size >= this.#sessionsPerProcess && this.#evict(child));
      // The size as last read (after this process's last open or run; placing reads no file).
      if ((child.residentBytes ?? 0) > this.#processMemoryBytes) this.#evict(child);
      if (child.sessions.size < this.#sessionsPerProcess) return child;
    }
    return undefined;
  }

  /** A ready spare while the pool has room, taken (and replaced at once, ahead of the next demand). */
  #readySpare(): SandboxChild | undefined {
    const live = [...this.#active].filter((child) => !child.exited).length;
    const index = this.#spares.findIndex((child) => child.isReady);
    if (live >= this.#maxProcesses || index === -1) return undefined;
    const spare = this.#spares.splice(index, 1)[0]!;
    this.#active.add(spare);
    this.#replaceSpare();
    return spare;
  }

  /**
   * Moves runs that wait behind another session's run (a process runs one isolate at a time, so a V8 abort cannot
   * take a neighbour's run with it) to processes with nothing to do: the session is rebuilt there from its runtime's
   * data, as after an eviction. A session never waits for a long run of another while a process is idle.
   */
  balance(): void {
    if (this.#closed) return;
    for (;;) {
      let source: SandboxChild | undefined;
      for (const child of this.#active) {
        if (child.waiting > 0 && (source === undefined || child.waiting > source.waiting)) source = child;
      }
      if (source === undefined) return;
      const target = this.#idleProcess();
      if (target === undefined) return;
      const run = source.takeWaiting()!;
      void this.#move(run, target);
    }
  }

  async #move(run: ChildRun, target: SandboxChild): Promise<void> {
    try {
      await run.session.moveTo(target, run.request.limits.memoryLimitBytes);
    } catch (error) {
      run.reject(new NotStarted((error as Error)?.message ?? String(error)));
      return;
    }
    target.enqueue(run);
  }

  /** Evicts the least recently used session (of one process, or of all) not running or waiting to run; false if none. */
  #evict(within?: SandboxChild): boolean {
    let victim: ProcessSession | undefined;
    for (const child of within === undefined ? this.#active : [within]) {
      for (const session of child.sessions.values()) {
        if (session.running) continue;
        if (victim === undefined || session.lastUsed < victim.lastUsed) victim = session;
      }
    }
    victim?.evict();
    return victim !== undefined;
  }

  /** A session left its process (disposed or evicted): a process left with no session ends. */
  released(child: SandboxChild): void {
    this.slotFreed();
    if (child.sessions.size > 0 || !this.#active.delete(child)) return;
    void child.stop("disposed");
  }

  /** Replaces a taken spare: at once, or after a delay when `prestart` started it (a one-shot run ends first). */
  #replaceSpare(): void {
    if (this.#refillLater) this.#scheduleRefill();
    else this.#fill();
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
    this.slotFreed();
    clearTimeout(this.#refill);
    const children = [...this.#spares, ...this.#active];
    this.#spares.length = 0;
    this.#active.clear();
    await Promise.all(children.map((child) => child.stop("disposed")));
  }

  #fill(count = this.#poolSize): void {
    // Spares count toward the bound: processes holding sessions plus spares never exceed maxProcesses.
    const room = () => this.#maxProcesses - [...this.#active].filter((child) => !child.exited).length;
    while (!this.#closed && this.#spares.length < Math.min(count, room())) {
      const child: SandboxChild = new SandboxChild({
        graceMs: this.#graceMs,
        spinMicroseconds: this.#spinMicroseconds,
        startTimeoutMs: this.#startTimeoutMs,
        maxQueuedRuns: this.#maxQueuedRuns,
        onEmpty: (empty) => this.released(empty),
        onRebalance: () => this.balance(),
        onExit: () => {
          this.#active.delete(child);
          this.slotFreed();
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
  readonly id: number;
  readonly membrane: HostMembrane;
  readonly #setup: SessionSetupSource;
  readonly #driver: ProcessDriver;
  child: SandboxChild | undefined;
  /** When the session last ran (eviction picks the least recently used). */
  lastUsed = performance.now();
  #runs = 0;
  /** Opened for a run that has not begun: not evicted meanwhile. */
  #fresh = true;
  #disposed = false;
  /** The memory limit its isolate was made with (in MiB, fixed for that isolate). */
  memoryMebibytes = 0;

  constructor(id: number, membrane: HostMembrane, setup: SessionSetupSource, driver: ProcessDriver) {
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
