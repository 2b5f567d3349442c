import { MossError } from "../errors.ts";
import {
  answerInOrder,
  errorWire,
  type HostBatchBridge,
  type HostCall,
  type HostCallBridge,
  type HostOutcome,
  hostCallOf,
  isolateClosureSource,
  parseBatch,
  type SandboxEnvelope,
  WIRE_TEXT_SLACK,
} from "../membrane/index.ts";
import { DEFAULT_LIMITS, type ExecutionErrorKind, type ExecutionLimits } from "../types.ts";
import { crashResult } from "./crash-result.ts";
import ivm from "./isolated-vm.ts";
import {
  memoryLimitMebibytes,
  type SandboxRunRequest,
  type SandboxRunResult,
  type SessionSetup,
} from "./sandbox.ts";

/*
 * One isolate + one context, the only file that imports isolated-vm. Used by both drivers. Host calls are always
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

type Failure = { kind: ExecutionErrorKind; name: string; message: string };

/** The isolate half as a script whose value is the closure `evalClosure` would make (same line numbers). */
let bootstrapScript: string | undefined;
function bootstrapScriptSource(): string {
  bootstrapScript ??= `(function ($0, $1, $2, $3) {${isolateClosureSource()}\n})`;
  return bootstrapScript;
}
const BOOTSTRAP_FILENAME = "moss-sandbox-bootstrap.js";

/**
 * V8's code cache of the bootstrap, made by this process's first isolate: compiling the ~50 kB bootstrap in every
 * new isolate cost ~1.5–3 ms of each session's open; from the cache it costs ~0.5 ms. V8 checks the cache
 * against the source and its flags and compiles afresh when it does not fit. Only trusted host source goes in.
 */
let bootstrapCache: ivm.ExternalCopy<ArrayBuffer> | undefined;

/** The bootstrap closure in a new context, compiled from the code cache when this process has one. */
async function bootstrapEntry(
  isolate: ivm.Isolate,
  context: ivm.Context,
  bridges: [ivm.Callback, ivm.Callback, ivm.Callback, ivm.Callback],
): Promise<ivm.Reference> {
  const cached = bootstrapCache;
  const script = (await isolate.compileScript(
    bootstrapScriptSource(),
    cached === undefined
      ? { filename: BOOTSTRAP_FILENAME, produceCachedData: true }
      : { filename: BOOTSTRAP_FILENAME, cachedData: cached },
  )) as ivm.Script & { cachedData?: ivm.ExternalCopy<ArrayBuffer>; cachedDataRejected?: boolean };
  if (cached === undefined || script.cachedDataRejected === true) bootstrapCache = script.cachedData;
  try {
    const closure = (await script.run(context, { reference: true })) as ivm.Reference;
    try {
      return (await closure.apply(undefined, bridges, { result: { reference: true } })) as ivm.Reference;
    } finally {
      closure.release();
    }
  } finally {
    script.release();
  }
}

interface ActiveRun {
  readonly limits: ExecutionLimits;
  readonly filename: string;
  readonly startedAt: number;
  readonly cpuStart: bigint;
  hostCalls: number;
  lastCpuMs: number;
  readonly stdout: string[];
  ended: boolean;
  finish?: (envelope: string | typeof PAUSED) => void;
  /** Host calls waiting for a decision (their isolate promises never settle in this run). */
  waiting: number;
  /** Host promises whose settlement has not entered the isolate yet. */
  outstanding: number;
  /** Settlements waiting for their one entry into the isolate (`[promiseId, tag, wire]`), in the order they came. */
  settlements: Array<[number, "v" | "e", string]>;
  /** The envelope `done` delivered; the run finishes once no entry into the isolate is still in flight. */
  envelope?: string;
  /** Entries into the isolate (the script, promise settlements) not yet returned: their microtasks belong to the run. */
  inFlight: number;
  /** The first rejected promise of model code that nothing handled (isolated-vm reports it as the entry's error). */
  unhandled?: { name: string; message: string };
  failure?: Failure;
  abort(failure: Failure): void;
  readonly aborted: Promise<Failure>;
}

const ABORTED = Symbol("aborted");
/** What `finish` receives when the run paused instead of delivering an envelope. */
const PAUSED = Symbol("paused");

class RunAborted extends Error {
  constructor(readonly failure: Failure) {
    super(failure.message);
  }
}

const TIMED_OUT = "Script execution timed out.";

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

  /** Creates the isolate, its context and the bootstrapped membrane (no session setup yet: a warm isolate). */
  static async create(options: IsolateSessionOptions): Promise<IsolateSession> {
    const memoryLimit = memoryLimitMebibytes(options.memoryLimitBytes);
    const isolate = new ivm.Isolate({ memoryLimit });
    IsolateSession.#live++;
    let session: IsolateSession | undefined;
    try {
      const context = await isolate.createContext();
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
      const entry = await bootstrapEntry(isolate, context, [bridge, emit, done, batch]);
      const get = (name: string) => entry.get(name, { reference: true }) as Promise<ivm.Reference>;
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
    const fields = JSON.stringify(setup.dataFields);
    await this.#apply(
      this.#install,
      [setup.globals, setup.mossData, setup.mossServices, fields, setup.definitions ?? ""],
      5_000,
    );
  }

  /** Runs one script and its target; faults of the model's code come back as data, never thrown. */
  async run(request: SandboxRunRequest): Promise<SandboxRunResult> {
    if (this.#running)
      throw new MossError("concurrent-execute", "a run is already in progress in this sandbox session");
    if (!this.alive) return crashResult("the sandbox session is no longer alive");
    this.#running = true;
    const limits = request.limits;
    let abort!: (failure: Failure) => void;
    const aborted = new Promise<Failure>((resolve) => {
      abort = resolve;
    });
    const run: ActiveRun = {
      limits,
      filename: request.filename,
      startedAt: performance.now(),
      cpuStart: this.#isolate.cpuTime,
      hostCalls: 0,
      inFlight: 0,
      waiting: 0,
      outstanding: 0,
      settlements: [],
      lastCpuMs: 0,
      stdout: [],
      ended: false,
      aborted,
      abort: (failure) => {
        if (run.failure !== undefined) return;
        run.failure = failure;
        this.#kill();
        abort(failure);
      },
    };
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
   * installed: the bootstrap's run path and this process's side of it are compiled while the isolate waits as a
   * spare, not during the first execute. Leaves no global behind.
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

  /** Disposes the isolate; idempotent. */
  /** Ends the run in flight, if any, with kind `aborted` (the isolate is discarded, as after a timeout). */
  stop(message: string): void {
    this.#active?.abort({ kind: "aborted", name: "AbortError", message });
  }

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
    const limits = run.limits;
    const finished = new Promise<string | typeof PAUSED>((resolve) => {
      run.finish = resolve;
    });
    // One entry evaluates the script and starts the target: each entry into the isolate is a thread hop.
    const args = [
      limits.maxStdoutBytes,
      request.script,
      request.filename,
      request.target,
      JSON.stringify(request.args),
      limits.maxResultBytes,
      request.replay === undefined ? "" : JSON.stringify(request.replay),
    ];
    // A limit failure of this entry aborts the run (the guard throws it); an unhandled rejection is recorded.
    await this.#guard(run, this.#enter(run, this.#runScript, args, this.#syncTimeout(run)));
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

  #result(
    run: ActiveRun,
    envelope: Omit<SandboxEnvelope, "error"> & { error?: Failure & { stack?: string } },
  ): SandboxRunResult {
    const result: SandboxRunResult = {
      ok: envelope.ok === true,
      stdout: run.stdout.join(""),
      warnings: boundedWarnings(envelope.warnings),
      hostCalls: Math.min(run.hostCalls, run.limits.maxHostCalls),
      cpuTimeMs: this.#cpuSince(run),
    };
    if (envelope.returns !== undefined) result.returns = envelope.returns;
    if (envelope.mossData !== undefined) result.mossData = envelope.mossData;
    if (envelope.error === undefined && run.unhandled !== undefined) {
      result.ok = false;
      delete result.returns;
      envelope = { ...envelope, error: { kind: "runtime", ...run.unhandled } };
    }
    if (envelope.error !== undefined) {
      const { kind, name, message, stack } = envelope.error;
      // Error text comes from model code: bounded so it cannot carry more than a result may.
      result.error = {
        kind,
        name: boundedText(name, MAX_ERROR_NAME),
        message: boundedText(message, MAX_ERROR_MESSAGE),
      };
      const filtered =
        typeof stack === "string"
          ? filterStack(boundedText(stack, MAX_ERROR_STACK), run.filename)
          : undefined;
      if (filtered !== undefined) result.error.stack = filtered;
    }
    // The isolate bounds the expanded value and the runtime checks it again before decoding; here only the text
    // in transit is bounded (wire text runs up to WIRE_TEXT_SLACK times the expanded size: indices, tags, base64).
    const returnsBytes = result.returns === undefined ? 0 : result.returns.length;
    const dataBytes = result.mossData === undefined ? 0 : result.mossData.length;
    const maxTextLength = WIRE_TEXT_SLACK * run.limits.maxResultBytes;
    if (returnsBytes + dataBytes > maxTextLength) {
      result.ok = false;
      delete result.returns;
      if (dataBytes > maxTextLength) delete result.mossData;
      result.error = {
        kind: "output-limit",
        name: "RangeError",
        message: `the result (return value plus moss data) exceeds the limit of ${run.limits.maxResultBytes} bytes`,
      };
    }
    return result;
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
      return `e${errorWire(error)}`;
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
          return { kind: "error", wire: errorWire(error) };
        }
      };
      let outcomes: HostOutcome[];
      try {
        outcomes =
          host.callBatch === undefined ? answerInOrder(admitted, answerOne) : host.callBatch(admitted);
      } catch (error) {
        outcomes = [{ kind: "error", wire: errorWire(error) }];
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
      return `e${errorWire(new Error("host objects can only be used while the code runs"))}`;
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
      (error: unknown) => this.#deliver(run, promiseId, "e", errorWire(error)),
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

/** Why a run that made too many host calls failed. */
function callLimitMessage(limits: ExecutionLimits): string {
  return `the run exceeded its limit of ${limits.maxHostCalls} host calls`;
}

/** Runs a synchronous isolated-vm call as a promise (its throw becomes a rejection). */
function later<T>(action: () => T): Promise<T> {
  try {
    return Promise.resolve(action());
  } catch (error) {
    return Promise.reject(error);
  }
}

function pollIntervalMs(limits: ExecutionLimits): number {
  return Math.min(50, Math.max(5, Math.floor(Math.min(limits.wallTimeMs, limits.cpuTimeMs) / 20)));
}

function timeoutFailure(message: string): Failure {
  return { kind: "timeout", name: "TimeoutError", message };
}

const MAX_ERROR_NAME = 200;
const MAX_ERROR_MESSAGE = 8 * 1024;
const MAX_ERROR_STACK = 16 * 1024;
const MAX_WARNINGS = 50;
const MAX_WARNING_BYTES = 16 * 1024;

/** Text from model code cut to `max` characters with a visible marker. */
function boundedText(value: unknown, max: number): string {
  const text = typeof value === "string" ? value : String(value ?? "");
  return text.length <= max ? text : `${text.slice(0, max)}… [${text.length - max} more characters]`;
}

/** Warnings are produced inside the isolate, so model code decides how many: keep a readable, bounded list. */
function boundedWarnings(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  const warnings: string[] = [];
  let bytes = 0;
  for (const item of value) {
    if (typeof item !== "string") continue;
    if (warnings.length >= MAX_WARNINGS || bytes + item.length > MAX_WARNING_BYTES) {
      warnings.push(`… and ${value.length - warnings.length} more warnings`);
      break;
    }
    warnings.push(boundedText(item, 1024));
    bytes += item.length;
  }
  return warnings;
}

/** Keeps the header of a V8 stack and only the frames located in `filename`. */
export function filterStack(stack: string, filename: string): string | undefined {
  const lines = stack.split("\n");
  const kept: string[] = [];
  let header = true;
  for (const line of lines) {
    const isFrame = /^\s+at /.test(line);
    if (!isFrame) {
      if (header) kept.push(line);
      continue;
    }
    header = false;
    if (line.includes(`(${filename}:`) || line.includes(`at ${filename}:`)) kept.push(line);
  }
  return kept.length === 0 ? undefined : kept.join("\n");
}
