import { type ChildProcess, spawn } from "node:child_process";
import type { Duplex } from "node:stream";
import { MossError } from "../errors.ts";
import type { HostMembrane } from "../membrane/index.ts";
import { CallPipe } from "./call-pipe.ts";
import {
  deathResult,
  type KillReason,
  MEMORY_POLL_MS,
  MEMORY_SLACK_BYTES,
  OUT_OF_MEMORY,
  ResidentReader,
} from "./child-death.ts";
import { abortedResult, crashResult } from "./crash-result.ts";
import { eventLoopAwake } from "./event-loop-awake.ts";
import { type ChildMessage, LineChannel, type ParentMessage } from "./line-channel.ts";
import type { ProcessSession } from "./process-session.ts";
import {
  memoryLimitMebibytes,
  type SandboxRunRequest,
  type SandboxRunResult,
  type SessionSetup,
} from "./sandbox.ts";
import { childArguments } from "./sandbox-entry.ts";

/*
 * One sandbox process as the process driver supervises it: its start and readiness, the sessions it holds, the
 * queue of their runs (one in flight at a time, with its time and memory watched from outside), the control pipe
 * (fd 3), its call pipe (fd 4, `call-pipe.ts`) and its death (`child-death.ts`).
 */

/**
 * How long a run must have been in flight before the runs waiting behind it in its process move to an idle process.
 * A move rebuilds the session there (a new isolate and its setup: ~5 ms of CPU on an idle machine, several times that
 * under load), so runs wait behind a short run and leave a long one (a spinner) at once after this.
 */
const MOVE_AFTER_MS = 20;

/** A run of a session, waiting for its sandbox process or in flight there. */
export interface ChildRun {
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
  /** Fires when a stopped run did not end in its process within STOP_GRACE_MS: the process is then killed. */
  stopTimer?: NodeJS.Timeout;
}

/**
 * How long a stopped run may take to end inside its process before the process is killed. The process reads the
 * stop between slices of model code; code spinning inside one slice (its length is the run's remaining time) reads
 * nothing, so only killing the process ends it "at once".
 */
export const STOP_GRACE_MS = 200;

/**
 * One supervised sandbox process: it keeps the isolates of up to `sessionsPerProcess` sessions warm and runs one of
 * them at a time (the others' runs wait in a bounded queue). Model code in it can end, crash or stall only the run
 * in flight; the other sessions it held lose their isolate and rebuild elsewhere on their next run. Idle, it does not
 * keep the host's event loop alive.
 */
export class SandboxChild {
  readonly process: ChildProcess;
  readonly ready: Promise<void>;
  /** The sessions whose isolate lives here, by id. */
  readonly sessions = new Map<number, ProcessSession>();
  readonly #channel: LineChannel<ChildMessage, ParentMessage>;
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
  #stopMessage = "";
  #stderrTail = "";
  /** The resident size that made the memory watch kill the process. */
  #killedAtBytes = 0;
  /**
   * The process's resident size as last read (`refreshResidentBytes`: when it became ready and after each open and
   * run); undefined until read, or where `/proc` is missing.
   */
  residentBytes: number | undefined;
  #resident: ResidentReader;
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
    this.#resident = new ResidentReader(this.process.pid);
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
    new CallPipe(calls, {
      membraneOf: (id) => this.#membraneOf(id),
      settle: (message) => this.#send(message),
      exited: () => this.#exited,
      onInvalid: (error) => {
        this.#invalidMessage = error.message;
        this.kill("invalid-message");
      },
      spinMicroseconds: options.spinMicroseconds,
    });
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
    if (this.#exited) throw new MossError("sandbox-failed", "the sandbox process had already ended");
    // The process is spoken for before anything is awaited (the setup may still be compiling its definitions), and
    // the open is registered then too: a process that ends while the setup is awaited fails the open (#exit rejects
    // every registered open) instead of leaving it waiting for an answer no process will send.
    this.sessions.set(session.id, session);
    this.#arriving++;
    this.#hold(true);
    const opened = new Promise<void>((resolve, reject) => {
      this.#opening.set(session.id, { resolve, reject });
    });
    // Rejected while the setup is still awaited, it is awaited (and its error thrown) below.
    opened.catch(() => {});
    try {
      await this.ready;
      const given = await setup;
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
    const run = this.#run;
    if (run?.session === session) {
      this.#send({ type: "stop", session: session.id, message });
      run.stopTimer ??= setTimeout(() => {
        if (this.#run !== run) return;
        this.#stopMessage = message;
        this.kill("aborted");
      }, STOP_GRACE_MS);
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
   * by more than isolated-vm lets a live isolate hold is killed (kind `memory`). Reads `/proc` every `MEMORY_POLL_MS`;
   * not on systems without it.
   */
  #watchMemory(memoryLimitBytes: number, run: ChildRun): NodeJS.Timeout | undefined {
    if (process.platform !== "linux") return undefined;
    // From the size as last read (after the last open or run here), or the first read if none is known yet.
    const headroom = 2 * memoryLimitBytes + MEMORY_SLACK_BYTES;
    let ceiling = this.residentBytes === undefined ? undefined : this.residentBytes + headroom;
    return setInterval(() => {
      this.refreshResidentBytes();
      const resident = this.residentBytes;
      if (this.#run !== run || resident === undefined) return;
      ceiling ??= resident + headroom;
      if (resident <= ceiling) return;
      this.#killedAtBytes = resident;
      this.kill("memory");
    }, MEMORY_POLL_MS);
  }

  /** Reads the process's resident size into `residentBytes` (a synchronous read of a few µs, see `ResidentReader`). */
  refreshResidentBytes(): void {
    if (this.#exited) return;
    const bytes = this.#resident.read();
    if (bytes !== undefined) this.residentBytes = bytes;
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
        clearTimeout(run.stopTimer);
        clearInterval(run.memoryWatch);
        this.#run = undefined;
        this.#hold(false);
        // A session whose isolate died is gone from this process (the child dropped it); its runtime opens anew.
        if (!message.alive) {
          this.sessions.delete(run.session.id);
          run.session.lost();
        }
        run.resolve(message.result);
        this.refreshResidentBytes();
        this.#next();
        if (this.sessions.size === 0) this.#onEmpty(this);
        else if (!this.busy) this.#onRebalance(this);
        return;
      }
      case "opened":
        this.#opening.get(message.session)?.resolve();
        this.refreshResidentBytes();
        return;
      case "open-failed":
        this.#opening
          .get(message.session)
          ?.reject(new MossError("sandbox-failed", `could not open a sandbox session: ${message.message}`));
        return;
      case "ready":
        this.#isReady = true;
        this.refreshResidentBytes();
        this.#onReady();
        this.#onRebalance(this);
        return;
    }
  }

  /** Only the session whose run is in flight may reach its membrane. */
  #membraneOf(id: number): HostMembrane | undefined {
    const session = this.sessions.get(id);
    return this.#run?.session === session ? session?.membrane : undefined;
  }

  #exit(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#exited) return;
    this.#exited = true;
    this.#resident.close();
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
      clearTimeout(run.stopTimer);
      clearInterval(run.memoryWatch);
      run.resolve(
        deathResult(run.request.limits, {
          message,
          killReason: this.#killReason,
          outOfMemory: this.#outOfMemory,
          killedAtBytes: this.#killedAtBytes,
          invalidMessage: this.#invalidMessage,
          stopMessage: this.#stopMessage,
        }),
      );
    }
    // Runs of other sessions that never started here: their sessions rebuild elsewhere and run then.
    for (const queued of this.#queue.splice(0)) queued.reject(new NotStarted(message));
    for (const session of this.sessions.values()) session.lost();
    this.sessions.clear();
    this.#onExit(this);
  }
}

/** A run that never started because its session's process died meanwhile (the session rebuilds and runs it then). */
export class NotStarted extends Error {}
