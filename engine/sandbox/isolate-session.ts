import { MossError } from "../errors.ts";
import {
  answerInOrder,
  type HostBatchBridge,
  type HostCall,
  type HostCallBridge,
  type HostOutcome,
  hostCallOf,
  hostErrorWire,
  parseBatch,
  type SandboxEnvelope,
} from "../membrane/index.ts";
import { DEFAULT_LIMITS } from "../types.ts";
import {
  ABORTED,
  type ActiveRun,
  callLimitMessage,
  type Failure,
  PAUSED,
  pollIntervalMs,
  RunAborted,
  startRun,
  TIMED_OUT,
  timeoutFailure,
} from "./active-run.ts";
import {
  bootstrapEntry,
  completeBootstrapCache,
  installArguments,
  runScriptArguments,
} from "./bootstrap-entry.ts";
import { EXERCISE_HOST, EXERCISE_RUN, EXERCISE_SETUP } from "./bootstrap-exercise.ts";
import { crashResult } from "./crash-result.ts";
import ivm from "./isolated-vm.ts";
import { type RunEnvelope, runResult } from "./run-result.ts";
import {
  memoryLimitMebibytes,
  type SandboxRunRequest,
  type SandboxRunResult,
  type SessionSetup,
} from "./sandbox.ts";

/*
 * One isolate + one context (with `bootstrap-entry.ts`, the only files that reach isolated-vm). Used by both drivers. Host calls are always
 * synchronous callbacks; what differs is where the isolate runs:
 * - "isolate-thread" (in process): on isolated-vm's own thread, so model code never blocks the caller's event
 *   loop; each host call hops to the main thread.
 * - "caller-thread" (sandbox process): on the calling thread, so a host call is a plain function call (the
 *   sandbox process then blocks on its pipe to the parent); model code blocks that thread only in slices
 *   bounded by isolated-vm's `timeout`, and the parent watches the process from outside.
 */

/** What an isolate session asks of the host: the membrane itself, or a blocking channel to the parent process. */
export interface SessionHost {
  call(call: HostCall): HostOutcome;
  /**
   * Answers a batch of calls in order in one exchange (see `answerInOrder`): a host across a pipe crosses once for
   * all of them. Without it each call goes through `call`.
   */
  callBatch?(calls: HostCall[]): HostOutcome[];
}

/** Where the isolate executes: on isolated-vm's thread (never blocks the caller) or on the calling thread. */
export type ExecutionThread = "isolate-thread" | "caller-thread";

/** Options of `IsolateSession.create`. */
export interface IsolateSessionOptions {
  memoryLimitBytes: number;
  thread: ExecutionThread;
}

export { memoryLimitMebibytes };

/** An isolate with its context and bootstrapped membrane; `install` it once, then `run` scripts in it. */
export class IsolateSession {
  static #live = 0;

  /** Number of sessions whose isolate is not yet disposed (tests assert nothing leaks). */
  static get liveCount(): number {
    return IsolateSession.#live;
  }

  readonly memoryLimitMebibytes: number;
  readonly #isolate: ivm.Isolate;
  readonly #references: Array<{ release(): void }>;
  readonly #thread: ExecutionThread;
  readonly #install: ivm.Reference;
  readonly #runScript: ivm.Reference;
  readonly #settle: ivm.Reference;
  readonly #settleAll: ivm.Reference;
  readonly #recorded: ivm.Reference;
  #host: SessionHost | undefined;
  #active: ActiveRun | undefined;
  #nextPromiseId = 1;
  #disposed = false;
  #running = false;

  private constructor(
    memoryLimit: number,
    thread: ExecutionThread,
    isolate: ivm.Isolate,
    entries: {
      install: ivm.Reference;
      runScript: ivm.Reference;
      settle: ivm.Reference;
      settleAll: ivm.Reference;
      recorded: ivm.Reference;
    },
    references: Array<{ release(): void }>,
  ) {
    this.memoryLimitMebibytes = memoryLimit;
    this.#thread = thread;
    this.#isolate = isolate;
    this.#install = entries.install;
    this.#runScript = entries.runScript;
    this.#settle = entries.settle;
    this.#settleAll = entries.settleAll;
    this.#recorded = entries.recorded;
    this.#references = references;
  }

  /** The process's exercise of the bootstrap (see `#exercise`), run before its first isolate is made. */
  static #exercised: Promise<void> | undefined;

  /** Creates the isolate, its context and the bootstrapped membrane (no session setup yet: a warm isolate). */
  static async create(options: IsolateSessionOptions): Promise<IsolateSession> {
    IsolateSession.#exercised ??= IsolateSession.#exercise(options.thread);
    await IsolateSession.#exercised;
    return IsolateSession.#createNow(options);
  }

  /**
   * Once per process: a session of trusted code (`bootstrap-exercise.ts`) in an isolate that no session gets, then
   * the bootstrap's code cache made from it (`completeBootstrapCache`), then the isolate disposed. Every isolate made
   * after it reads the functions a session runs from the cache. A failure leaves the first cache: sessions open as
   * before, only slower.
   */
  static async #exercise(thread: ExecutionThread): Promise<void> {
    let session: IsolateSession | undefined;
    try {
      session = await IsolateSession.#createNow({
        memoryLimitBytes: DEFAULT_LIMITS.memoryLimitBytes,
        thread,
      });
      await session.warmUp();
      await session.install(EXERCISE_SETUP, EXERCISE_HOST);
      const result = await session.run(EXERCISE_RUN);
      if (result.ok) await completeBootstrapCache(session.#isolate);
    } catch {
    } finally {
      session?.dispose();
    }
  }

  static async #createNow(options: IsolateSessionOptions): Promise<IsolateSession> {
    const memoryLimit = memoryLimitMebibytes(options.memoryLimitBytes);
    const isolate = new ivm.Isolate({ memoryLimit });
    IsolateSession.#live++;
    let session: IsolateSession | undefined;
    try {
      // On the caller thread every step is synchronous: an asynchronous one hops to isolated-vm's thread and back.
      const sync = options.thread === "caller-thread";
      const context = sync ? isolate.createContextSync() : await isolate.createContext();
      const answer: HostCallBridge = (...call) => session!.#answer(hostCallOf(call));
      const bridge = new ivm.Callback(answer);
      // On the isolate thread stdout is fire-and-forget; on the caller thread a direct call keeps it in order.
      const emit = new ivm.Callback(
        (text: string) => {
          if (session !== undefined) session.#emit(text);
        },
        options.thread === "isolate-thread" ? { ignored: true } : {},
      );
      const done = new ivm.Callback((envelope: string) => {
        if (session !== undefined) session.#done(envelope);
      });
      const answerBatch: HostBatchBridge = (calls) => session!.#answerBatch(calls);
      const batch = new ivm.Callback(answerBatch);
      const entry = await bootstrapEntry(isolate, context, [bridge, emit, done, batch], sync);
      const get = (name: string) =>
        (sync ? entry.getSync(name, { reference: true }) : entry.get(name, { reference: true })) as
          | ivm.Reference
          | Promise<ivm.Reference>;
      const [install, runScript, settle, settleAll, recorded] = await Promise.all([
        get("install"),
        get("runScript"),
        get("settle"),
        get("settleAll"),
        get("recorded"),
      ]);
      const entries = { install, runScript, settle, settleAll, recorded };
      const references = [entry, install, runScript, settle, settleAll, recorded, context];
      session = new IsolateSession(memoryLimit, options.thread, isolate, entries, references);
      return session;
    } catch (error) {
      if (!isolate.isDisposed) isolate.dispose();
      IsolateSession.#live--;
      throw new MossError(
        "sandbox-failed",
        `could not start an isolate: ${(error as Error)?.message ?? error}`,
        {},
        { cause: error },
      );
    }
  }

  /** False once the isolate died or was disposed. */
  get alive(): boolean {
    return !this.#disposed && !this.#isolate.isDisposed;
  }

  /** Installs the module globals and `moss`, and attaches the host that answers the proxies' calls. */
  async install(setup: SessionSetup, host: SessionHost): Promise<void> {
    if (this.#host !== undefined)
      throw new MossError("sandbox-failed", "the isolate session is already installed");
    this.#host = host;
    await this.#apply(this.#install, installArguments(setup), 5_000);
  }

  /** Runs one script and its target; faults of the model's code come back as data, never thrown. */
  async run(request: SandboxRunRequest): Promise<SandboxRunResult> {
    if (this.#running)
      throw new MossError("concurrent-execute", "a run is already in progress in this sandbox session");
    if (!this.alive) return crashResult("the sandbox session is no longer alive");
    this.#running = true;
    const limits = request.limits;
    const run = startRun(limits, request.filename, this.#isolate.cpuTime, () => this.#kill());
    this.#active = run;
    const watchdog = setInterval(() => this.#watch(run), pollIntervalMs(limits));
    watchdog.unref();
    try {
      return await this.#execute(run, request);
    } catch (error) {
      const failure =
        error instanceof RunAborted ? error.failure : (run.failure ?? this.#classify(run, error));
      if (failure.kind === "timeout" || failure.kind === "memory" || failure.kind === "crash") this.#kill();
      return this.#result(run, { ok: false, error: failure, warnings: [] });
    } finally {
      run.ended = true;
      clearInterval(watchdog);
      this.#active = undefined;
      this.#running = false;
    }
  }

  /**
   * Runs an empty script (its target is missing, so the run ends with a runtime error) before the session is
   * installed: the bootstrap's run path, its error path and this process's side of it are compiled. The process's
   * exercise of the bootstrap (`#exercise`) runs it. Leaves no global behind.
   */
  async warmUp(): Promise<void> {
    await this.run({
      script: "",
      filename: "moss-warm-up.js",
      target: "__moss_warm_up__",
      args: [],
      limits: DEFAULT_LIMITS,
    });
  }

  /** Ends the run in flight, if any, with kind `aborted` (the isolate is discarded, as after a timeout). */
  stop(message: string): void {
    this.#active?.abort({ kind: "aborted", name: "AbortError", message });
  }

  /** Disposes the isolate (a run in flight ends with kind `crash`); idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    const run = this.#active;
    if (run !== undefined && !run.ended) {
      run.abort({
        kind: "crash",
        name: "SandboxError",
        message: "the sandbox session was disposed during the run",
      });
    }
    this.#kill();
  }

  async #execute(run: ActiveRun, request: SandboxRunRequest): Promise<SandboxRunResult> {
    const finished = new Promise<string | typeof PAUSED>((resolve) => {
      run.finish = resolve;
    });
    // A limit failure of this entry aborts the run (the guard throws it); an unhandled rejection is recorded.
    await this.#guard(
      run,
      this.#enter(run, this.#runScript, runScriptArguments(request), this.#syncTimeout(run)),
    );
    const outcome = await this.#guard(run, finished);
    if (outcome === PAUSED) return this.#paused(run);
    const envelope = JSON.parse(outcome) as SandboxEnvelope;
    if ((envelope.error?.kind as string | undefined) === "syntax")
      await this.#locateSyntaxError(envelope.error!, request);
    return this.#result(run, envelope);
  }

  /**
   * A paused run: its clock and random log is read, then the isolate is discarded (model code changed its state
   * part-way; a resume starts over from the data as it was before the run).
   */
  async #paused(run: ActiveRun): Promise<SandboxRunResult> {
    if (run.hostCalls > run.limits.maxHostCalls) {
      // A run past its call limit failed, whatever still waits: pausing it would hand a person thousands of
      // requests (and the limit's error would be lost) for a run that cannot finish.
      this.#kill();
      const message = callLimitMessage(run.limits);
      return this.#result(run, {
        ok: false,
        error: { kind: "call-limit", name: "Error", message },
        warnings: [],
      });
    }
    let nondeterminism: SandboxRunResult["nondeterminism"] = { clock: [], random: [] };
    try {
      nondeterminism = JSON.parse(String(await this.#apply(this.#recorded, [], 1_000)));
    } catch {}
    this.#kill();
    return { ...this.#result(run, { ok: false, warnings: [] }), paused: true, nondeterminism };
  }

  /**
   * Eval reports a syntax error without its position; only on that (rare: the runtime's esbuild step rejects
   * syntax errors first) the script is compiled once more to read where the error is.
   */
  async #locateSyntaxError(
    error: NonNullable<SandboxEnvelope["error"]>,
    request: SandboxRunRequest,
  ): Promise<void> {
    try {
      (await this.#isolate.compileScript(request.script, { filename: request.filename })).release();
    } catch (compileError) {
      const text = compileError instanceof Error ? compileError.message : String(compileError);
      const located = /^(.*) \[(.+):(\d+):(\d+)\]$/s.exec(text);
      if (located) {
        const [, message, file, line, column] = located;
        error.message = message!;
        error.stack = `${error.name}: ${message}\n    at ${file}:${line}:${column}`;
      }
    }
  }

  /** Calls an entry point of the bootstrap on the session's execution thread. */
  #apply(reference: ivm.Reference, args: Array<string | number>, timeout: number): Promise<unknown> {
    if (this.#thread === "isolate-thread") return reference.apply(undefined, args, { timeout });
    return later(() => reference.applySync(undefined, args, { timeout }));
  }

  #result(run: ActiveRun, envelope: RunEnvelope): SandboxRunResult {
    return runResult(run, envelope, this.#cpuSince(run));
  }

  /** Races an isolate promise against the run's watchdog; a rejection after dispose is swallowed. */
  async #guard<T>(run: ActiveRun, promise: Promise<T>): Promise<T> {
    promise.catch(() => {});
    const outcome = await Promise.race([promise, run.aborted.then(() => ABORTED)]);
    if (outcome === ABORTED) throw new RunAborted(run.failure!);
    return outcome as T;
  }

  #watch(run: ActiveRun): void {
    if (run.ended || run.failure !== undefined) return;
    const limits = run.limits;
    const wall = performance.now() - run.startedAt;
    if (wall > limits.wallTimeMs) {
      run.abort(timeoutFailure(`the run exceeded its wall-time limit of ${limits.wallTimeMs} ms`));
      return;
    }
    const cpu = this.#cpuSince(run);
    if (cpu > limits.cpuTimeMs)
      run.abort(timeoutFailure(`the run exceeded its CPU-time limit of ${limits.cpuTimeMs} ms`));
  }

  #cpuSince(run: ActiveRun): number {
    try {
      if (!this.#isolate.isDisposed) run.lastCpuMs = Number(this.#isolate.cpuTime - run.cpuStart) / 1e6;
    } catch {}
    return run.lastCpuMs;
  }

  #syncTimeout(run: ActiveRun): number {
    const limits = run.limits;
    const remainingWall = limits.wallTimeMs - (performance.now() - run.startedAt);
    const remainingCpu = limits.cpuTimeMs - this.#cpuSince(run);
    return Math.max(1, Math.ceil(Math.min(remainingWall, remainingCpu)));
  }

  /** A timeout or memory failure behind an isolated-vm error, or undefined for an ordinary model error. */
  #limitFailure(run: ActiveRun, error: unknown, elapsedMs: number, timeoutMs: number): Failure | undefined {
    if (run.failure !== undefined) return run.failure;
    if (this.#isolate.isDisposed) return this.#memoryFailure();
    const message = (error as Error | null)?.message;
    if (message === TIMED_OUT && elapsedMs >= timeoutMs * 0.9) {
      const limits = run.limits;
      const cpuBound =
        limits.cpuTimeMs - this.#cpuSince(run) < limits.wallTimeMs - (performance.now() - run.startedAt);
      return timeoutFailure(
        cpuBound
          ? `the run exceeded its CPU-time limit of ${limits.cpuTimeMs} ms`
          : `the run exceeded its wall-time limit of ${limits.wallTimeMs} ms`,
      );
    }
    if (typeof message === "string" && message.includes("memory limit")) return this.#memoryFailure();
    return undefined;
  }

  #classify(run: ActiveRun, error: unknown): Failure {
    return (
      this.#limitFailure(run, error, Number.POSITIVE_INFINITY, 0) ?? {
        kind: "crash",
        name: "SandboxError",
        message: `the sandbox failed: ${(error as Error | null)?.message ?? String(error)}`,
      }
    );
  }

  #memoryFailure(): Failure {
    return {
      kind: "memory",
      name: "RangeError",
      message: `the run exceeded its memory limit of ${this.memoryLimitMebibytes} MiB and the isolate was disposed`,
    };
  }

  #emit(text: string): void {
    const run = this.#active;
    if (run !== undefined && !run.ended) run.stdout.push(text);
  }

  /** Answers a host call from the isolate (synchronous for the isolate on either thread). */
  #answer(call: HostCall): string {
    const run = this.#admit();
    if (typeof run === "string") return run;
    try {
      return this.#reply(run, this.#host!.call(call));
    } catch (error) {
      return `e${hostErrorWire(error)}`;
    }
  }

  /**
   * Answers a batch of calls (`HostBatchBridge`) in order, each admitted and decided as if it were made alone. The
   * replies stop at one that ends the run's calls (past the call limit, refused, paused): the isolate fails the calls
   * after it with that reply's message, as it fails a call made after it.
   */
  #answerBatch(text: string): string {
    const replies: string[] = [];
    let calls: HostCall[];
    try {
      calls = parseBatch(text);
    } catch {
      return "[]";
    }
    const admitted: HostCall[] = [];
    let refused: string | undefined;
    for (const call of calls) {
      const run = this.#admit();
      if (typeof run === "string") {
        refused = run;
        break;
      }
      admitted.push(call);
    }
    const run = this.#active;
    if (admitted.length > 0 && run !== undefined) {
      const host = this.#host!;
      const answerOne = (call: HostCall): HostOutcome => {
        try {
          return host.call(call);
        } catch (error) {
          return { kind: "error", wire: hostErrorWire(error) };
        }
      };
      let outcomes: HostOutcome[];
      try {
        outcomes =
          host.callBatch === undefined ? answerInOrder(admitted, answerOne) : host.callBatch(admitted);
      } catch (error) {
        outcomes = [{ kind: "error", wire: hostErrorWire(error) }];
      }
      // Calls the host did not make were not made: they count as the calls model code makes after a refusal do.
      run.hostCalls -= admitted.length - outcomes.length;
      for (const outcome of outcomes) replies.push(this.#reply(run, outcome));
      if (outcomes.length < admitted.length) return JSON.stringify(replies);
    }
    if (refused !== undefined) {
      // Not running: every call hears so; past the limit: the first call that crossed it does, the rest fail so.
      if (refused.startsWith("e")) while (replies.length < calls.length) replies.push(refused);
      else replies.push(refused);
    }
    return JSON.stringify(replies);
  }

  #done(envelope: string): void {
    const run = this.#active;
    if (run === undefined || run.ended) return;
    run.envelope = envelope;
    this.#finishWhenIdle(run);
  }

  /**
   * Enters the isolate for the run. The run is over only once `done` delivered its envelope *and* every entry
   * returned: microtasks model code queued at the end drain inside that entry, under the run's limits, never after.
   */
  #enter(
    run: ActiveRun,
    reference: ivm.Reference,
    args: Array<string | number>,
    timeout: number,
  ): Promise<void> {
    run.inFlight++;
    const started = performance.now();
    return this.#apply(reference, args, timeout).then(
      () => this.#left(run),
      (error: unknown) => {
        // Classified before the entry counts as returned, so a limit failure wins over the envelope.
        if (!run.ended) {
          const failure = this.#limitFailure(run, error, performance.now() - started, timeout);
          if (failure !== undefined) run.abort(failure);
          else this.#unhandledRejection(run, error);
        }
        this.#left(run);
      },
    );
  }

  #left(run: ActiveRun): void {
    run.inFlight--;
    this.#finishWhenIdle(run);
  }

  /**
   * The run ends once no entry into the isolate is in flight and either its envelope arrived or it can only wait
   * for decisions: calls wait for one, and every host promise it started has settled and been delivered (so each
   * completed call of the run's log has its result). A waiting call keeps a finished run from ending as a success.
   */
  #finishWhenIdle(run: ActiveRun): void {
    if (run.inFlight !== 0 || run.ended || run.failure !== undefined) return;
    if (run.waiting > 0) {
      if (run.outstanding === 0) run.finish?.(PAUSED);
      return;
    }
    if (run.envelope !== undefined) run.finish?.(run.envelope);
  }

  /**
   * An entry that failed without a limit failure: its bootstrap entry points never throw, so isolated-vm is
   * reporting a promise model code rejected and never handled. The run goes on; the rejection becomes its error.
   */
  #unhandledRejection(run: ActiveRun, error: unknown): void {
    if (run.unhandled !== undefined) return;
    const name = error instanceof Error && typeof error.name === "string" ? error.name : "Error";
    const message = error instanceof Error ? error.message : String(error);
    run.unhandled = { name, message: `a promise was rejected and never handled: ${message}` };
  }

  #admit(): ActiveRun | string {
    const run = this.#active;
    if (run === undefined || run.ended || this.#host === undefined) {
      return `e${hostErrorWire(new Error("host objects can only be used while the code runs"))}`;
    }
    run.hostCalls++;
    if (run.hostCalls > run.limits.maxHostCalls) return `l${callLimitMessage(run.limits)}`;
    return run;
  }

  #reply(run: ActiveRun, outcome: HostOutcome): string {
    if (outcome.kind === "value") return `v${outcome.wire}`;
    if (outcome.kind === "error") return `e${outcome.wire}`;
    if (outcome.kind === "pending") {
      run.waiting++;
      return "w";
    }
    if (outcome.kind === "pause") {
      run.waiting++;
      return "sthe run paused: this call waits for a person's decision";
    }
    if (outcome.kind === "refuse") return `d${outcome.message}`;
    run.outstanding++;
    const promiseId = this.#nextPromiseId++;
    outcome.settled.then(
      (settled) =>
        settled.kind === "pending"
          ? this.#waitInstead(run)
          : this.#deliver(run, promiseId, settled.kind === "value" ? "v" : "e", settled.wire),
      (error: unknown) => this.#deliver(run, promiseId, "e", hostErrorWire(error)),
    );
    return `p${promiseId}`;
  }

  /** A host promise that became a wait for a person: it is never delivered, and the run may pause. */
  #waitInstead(run: ActiveRun): void {
    if (run.ended || run.failure !== undefined || !this.alive) return;
    run.outstanding--;
    run.waiting++;
    this.#finishWhenIdle(run);
  }

  /**
   * Queues a host promise's settlement; the settlements that arrive in one turn of this thread enter the isolate
   * together, in the order they came (one entry instead of one each).
   */
  #deliver(run: ActiveRun, promiseId: number, tag: "v" | "e", wire: string): void {
    if (run.ended || run.failure !== undefined || !this.alive) return;
    run.settlements.push([promiseId, tag, wire]);
    if (run.settlements.length === 1) queueMicrotask(() => this.#deliverQueued(run));
  }

  #deliverQueued(run: ActiveRun): void {
    const settlements = run.settlements;
    run.settlements = [];
    if (run.ended || run.failure !== undefined || !this.alive || settlements.length === 0) return;
    run.outstanding -= settlements.length;
    const timeout = this.#syncTimeout(run);
    if (settlements.length === 1) void this.#enter(run, this.#settle, settlements[0]!, timeout);
    else void this.#enter(run, this.#settleAll, [JSON.stringify(settlements)], timeout);
  }

  #kill(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const reference of this.#references) {
      try {
        reference.release();
      } catch {}
    }
    try {
      if (!this.#isolate.isDisposed) this.#isolate.dispose();
    } catch {}
    IsolateSession.#live--;
  }
}

/** Runs a synchronous isolated-vm call as a promise (its throw becomes a rejection). */
function later<T>(action: () => T): Promise<T> {
  try {
    return Promise.resolve(action());
  } catch (error) {
    return Promise.reject(error);
  }
}
