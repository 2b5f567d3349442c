import { createHash, randomUUID } from "node:crypto";
import path from "node:path";
import { context as otelContext, trace as otelTrace, SpanStatusCode } from "@opentelemetry/api";
import { type Container, destroyOnce } from "../../container/index.ts";
import { checkAnswers } from "../answers.ts";
import { DEFAULT_TYPE_CHECK_TIMEOUT_MS, renderDiagnostics, WorkerModuleChecker } from "../check/index.ts";
import {
  contextVersion,
  createContext,
  decodeProperties,
  encodeWireProperties,
  partitionProperties,
  type WireDocument,
  wireDocument,
} from "../context/index.ts";
import { codeFrame, MossError } from "../errors.ts";
import { stripFences } from "../fenced-code.ts";
import { MAX_IMAGE_BYTES, ShownImages } from "../image-content.ts";
import {
  addHostRoot,
  encodeWire,
  encodeWireFields,
  joinWireRecord,
  joinWireRecords,
  redactHostPaths,
  splitWireRecord,
} from "../membrane/index.ts";
import { type CompiledModule, dataFieldMisfits, hiddenNames, visibleValueNames } from "../module/index.ts";
import type { Injection } from "../moss.ts";
import { MossPrompter } from "../prompter/moss-prompter.ts";
import { abortedResult } from "../sandbox/index.ts";
import type {
  HostMembrane as HostMembraneContract,
  Nondeterminism,
  SandboxDriver,
  SandboxRunResult,
  SandboxSession,
  SessionSetup,
} from "../sandbox/sandbox.ts";
import { SNIPPET_SCRIPT } from "../snippet-file.ts";
import {
  type Answers,
  type CallPolicy,
  DEFAULT_LIMITS,
  type Diagnostic,
  type ExecuteRequest,
  type Execution,
  type ExecutionError,
  type ExecutionLimits,
  type MossContext,
  type TypeCheckMode,
} from "../types.ts";
import {
  type ContinuationPayload,
  claimContinuation,
  continuationKey,
  DEFAULT_CONTINUATION_TTL_MS,
  MAX_CONTINUATION_RESULTS,
  openContinuation,
  signContinuation,
} from "./continuation.ts";
import {
  type DeclaredType,
  type ModuleDeclarations,
  moduleDeclarations,
  RUNTIME,
} from "./declared-members.ts";
import { HostMembrane, outsideRun } from "./host-membrane.ts";
import { mapCallSiteToSnippet, mapStack, type PreparedSnippet, prepareSnippet } from "./prepare-snippet.ts";
import { type LogEntry, newRequestTag, RunLog, tracer } from "./run-log.ts";
import { RunSignal } from "./run-signal.ts";
import { SessionDefinitions } from "./session-definitions.ts";
import { sharedSandboxDriver } from "./shared-sandbox.ts";

/** Node 20.4+ and 22+ define Symbol.asyncDispose; older runtimes get Node's registered symbol. */
const asyncDispose: typeof Symbol.asyncDispose =
  Symbol.asyncDispose ?? (Symbol.for("nodejs.asyncDispose") as typeof Symbol.asyncDispose);
/** Options the compiler passes to the runtime it builds. */
export interface MossRuntimeOptions {
  module: CompiledModule;
  container: Container;
  locals: Record<string, unknown>;
  context?: MossContext;
  typeCheck?: TypeCheckMode;
  limits?: Partial<ExecutionLimits>;
  /** `process` (default): isolates in supervised child processes; `in-process`; or a driver of your own. */
  sandbox?: "process" | "in-process" | SandboxDriver;
  /** Warnings of the compile that built this runtime (binding conflicts). */
  compileWarnings?: readonly string[];
  /** Decide each host call from model code (the compiler's `policy()`, then the module's `__moss_policy__`). */
  policies?: readonly CallPolicy[];
  /** Signs continuations of paused runs (HMAC-SHA256); default: a random key of this process. */
  continuationKey?: string | Uint8Array;
  /** How long a continuation can be resumed. Default one hour. */
  continuationTtlMs?: number;
  /**
   * Whether runs can pause for approvals and questions (default true). When false, a call that needs a decision is
   * denied (`ApprovalDenied`) instead of pausing; the call trace is kept either way.
   */
  durableRuns?: boolean;
}

/** Options of `runtime.resume()`. */
export interface ResumeOptions {
  /** Overrides any limit for the resumed run. */
  limits?: Partial<ExecutionLimits>;
  /** Stops the resumed run when it aborts (see `ExecuteRequest.signal`). */
  signal?: AbortSignal;
}

/** One run of model code: a new execute, or a resume replaying a log. */
interface RunPlan {
  code: string;
  prepared: PreparedSnippet;
  target: string;
  /** Wire-encoded extra arguments. */
  args: string[];
  localArgs: string[];
  limits: ExecutionLimits;
  replay: readonly LogEntry[];
  nondeterminism?: Nondeterminism;
  answers: Answers;
  /** The data fields' encoded properties when the run began (a continuation carries them). */
  dataBefore: Record<string, unknown>;
  /** Stops the run when it aborts (see `ExecuteRequest.signal`). */
  signal?: AbortSignal;
  /** The run's part of its request ids, drawn when it first starts and kept across its pauses and takeovers. */
  requestTag: string;
}

type ExecHook = (
  runtime: MossRuntime,
  request: ExecuteRequest,
  next: (request: ExecuteRequest) => Promise<Execution>,
) => Promise<Execution>;

const MAX_CUMULATIVE_STDOUT = 1024 * 1024;
/** A run's log (kept for its continuation) holds at most this many times `maxResultBytes` of arguments and results. */
const MAX_LOG_RESULTS = 4;

/** A compiled context module ready to run the model's code: made by `MossCompiler.compile()`. */
export class MossRuntime {
  readonly #module: CompiledModule;
  readonly #container: Container;
  readonly #locals: Record<string, unknown>;
  readonly #typeCheck: TypeCheckMode;
  readonly #limits: ExecutionLimits;
  readonly #sandbox: "process" | "in-process" | SandboxDriver;
  readonly #services = new Map<string, unknown>();
  readonly #compileWarnings: readonly string[];
  readonly #policies: readonly CallPolicy[];
  readonly #continuationKey: Uint8Array;
  readonly #continuationTtlMs: number;
  readonly #durableRuns: boolean;
  /** Names this runtime's handles in run logs: a logged result holding them replays only here. */
  readonly #origin = randomUUID();
  #moduleHash: string | undefined;
  /** The log of the run in progress: the session's host calls go through it. */
  #runLog: RunLog | undefined;
  /** Images the run in progress showed with `moss.show`. */
  #shownImages: ShownImages | undefined;
  readonly #checkpointListeners = new Set<(checkpoint: string) => unknown>();
  /** The data fields: a host value, or (once persisted) the wire text it was persisted as, never decoded here. */
  #data: Record<string, unknown> = {};
  #context: MossContext;
  #hostMoss: Record<string, unknown> | undefined;
  #prompter: MossPrompter | undefined;
  #checker: WorkerModuleChecker | undefined;
  /** The one record of the session's kept definitions: the checker and every new isolate of the session get it. */
  readonly #definitions: SessionDefinitions;
  /** The record compiled into the classic script a new isolate evaluates (made when a session opens). */
  #definitionsScript: { text: string; script: string } = { text: "", script: "" };
  #membrane: HostMembrane | undefined;
  #serviceClasses: Set<unknown> | undefined;
  readonly #declarations: ModuleDeclarations;
  #session: SandboxSession | undefined;
  #stdout: string[] = [];
  /** Data fields refused when the session was installed, reported with the next execution. */
  readonly #installWarnings: string[] = [];
  #stdoutBytes = 0;
  #busy = false;
  #closed = false;
  #closing: Promise<void> | undefined;
  /** The wire snapshot of the data fields last persisted cleanly (a run leaving the same text changed nothing). */
  #persistedSnapshot: { wire: string; maxBytes: number } | undefined;
  /**
   * The expanded size of each data field as the sandbox last sent it: a snapshot carries only the fields that
   * changed, and with the ones it left out it stays within the result limit.
   */
  readonly #fieldSizes = new Map<string, number>();
  /** Whether the last persist saved every field it was given (else the next one encodes every field again). */
  #persistedClean = false;

  constructor(options: MossRuntimeOptions) {
    this.#module = options.module;
    this.#container = options.container;
    this.#locals = options.locals;
    this.#typeCheck = options.typeCheck ?? "strict";
    this.#limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.#sandbox = options.sandbox ?? "process";
    this.#compileWarnings = options.compileWarnings ?? [];
    this.#policies = options.policies ?? [];
    this.#continuationKey = continuationKey(options.continuationKey);
    this.#continuationTtlMs = options.continuationTtlMs ?? DEFAULT_CONTINUATION_TTL_MS;
    this.#durableRuns = options.durableRuns ?? true;
    addHostRoot(path.dirname(options.module.path));
    this.#declarations = moduleDeclarations(options.module.analysis.declaredTypes);
    const context = options.context ?? createContext(options.module.displayPath);
    // The session's identity: made once, then saved with the context (old documents without one get one here).
    this.#context = { ...context, id: context.id ?? randomUUID(), module: options.module.displayPath };
    this.#definitions = new SessionDefinitions(context.definitions);
    this.#context = this.#withDefinitions(this.#context);
  }

  /** Called by the compiler: injects services (calling `onInject`) and the initial data fields. */
  async initialize(services: Map<string, unknown>, data: Record<string, unknown>): Promise<void> {
    for (const [field, service] of services) {
      const injection = service as Injection | undefined;
      if (injection && typeof injection.onInject === "function") await injection.onInject(this, field);
      this.#services.set(field, service);
    }
    this.#data = data;
    this.#persistedSnapshot = undefined;
    this.#fieldSizes.clear();
    const moss = new this.#module.mossClass() as Record<string, unknown>;
    for (const [field, service] of this.#services) moss[field] = service;
    Object.assign(moss, data);
    this.#hostMoss = moss;
    // The module's checker starts loading now (shared by the module's sessions, only where the pool has room).
    if (this.#typeCheck !== "off") this.#moduleChecker().prime();
  }

  /** The host-side `moss` handed to `__moss_compiled__` (services and data, before the first execute). */
  hostMoss(): Record<string, unknown> {
    return this.#hostMoss ?? {};
  }

  /**
   * Takes the data fields back from the host-side moss (after `__moss_compiled__`) and persists them, but `leftOut`
   * (the compiler checked them against the declared types first, `dataFieldMisfits`).
   */
  adoptHostData(leftOut: readonly string[] = []): void {
    const moss = this.hostMoss();
    for (const field of this.#dataFields()) if (field in moss) this.#data[field] = moss[field];
    // Fields the host left undefined where their type has no room for it (`when!: Date`): not stored.
    for (const field of leftOut) delete this.#data[field];
    this.#persistedSnapshot = undefined;
    this.#fieldSizes.clear();
    this.#persist([]);
  }

  /**
   * Warnings of the compile that built this runtime, e.g. a binding of `__moss_compile__` overridden by the host's
   * binding of the same token (each is also emitted with `process.emitWarning`, code `MOSS_BINDING_CONFLICT`).
   */
  compileWarnings(): readonly string[] {
    return [...this.#compileWarnings];
  }

  /** The module this runtime runs. */
  get modulePath(): string {
    return this.#module.displayPath;
  }

  /** The compiler's container (a child of the one the compiler was given). */
  container(): Container {
    return this.#container;
  }

  /** The prompter of this module. */
  prompter(): MossPrompter {
    this.#prompter ??= new MossPrompter(this.#module);
    return this.#prompter;
  }

  /** Type-checks the model's code against the module without running it (in a worker thread, within limits). */
  async typecheck(code: string): Promise<Diagnostic[]> {
    this.#assertOpen();
    return this.#hinted(await this.#moduleChecker().check(stripFences(code)));
  }

  /** Runs the model's code; faults of that code come back in `Execution.error`, never as exceptions. */
  async execute(request: ExecuteRequest): Promise<Execution> {
    this.#assertOpen();
    if (this.#busy) {
      throw new MossError(
        "concurrent-execute",
        "execute() is already running on this runtime: await it first",
        {},
      );
    }
    this.#busy = true;
    try {
      const hook = this.#module.hooks.__moss_exec__ as ExecHook | undefined;
      const next = (next: ExecuteRequest) => this.#executeDefault(next);
      return hook ? await hook(this, request, next) : await next(request);
    } finally {
      this.#busy = false;
    }
  }

  /** Everything the model's code printed on this runtime, across executions. */
  dumpStdOutput(): string {
    return this.#stdout.join("");
  }

  /** The current MossContext (a copy). */
  dumpContext(): MossContext {
    return structuredClone(this.#context);
  }

  /** The service fields of `moss` and their values. */
  mossInjections(): Record<string, unknown> {
    return Object.fromEntries(this.#services);
  }

  /** Whether `close()` was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Disposes the isolate, calls `onDestroy` once per injected service (once per process for a service shared by
   * several runtimes) and shuts down the compiler's container. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#closeNow();
    return this.#closing;
  }

  /** `await using runtime = await compiler.compile(…)` closes the runtime when the scope ends. */
  [asyncDispose](): Promise<void> {
    return this.close();
  }

  async #closeNow(): Promise<void> {
    this.#closed = true;
    const session = this.#session;
    this.#session = undefined;
    await session?.dispose().catch(() => {});
    await this.#checker?.close();
    const errors: unknown[] = [];
    for (const service of new Set(this.#services.values())) {
      try {
        await destroyOnce(service);
      } catch (error) {
        errors.push(error);
      }
    }
    await this.#container.shutdown().catch((error: unknown) => errors.push(error));
    if (errors.length > 0) throw new AggregateError(errors, "onDestroy failed for some services");
  }

  /**
   * Calls `listener` when a new run begins, and when each host call of a run starts and completes, with a signed
   * continuation of the run so far that waits for nothing: if this process dies mid-run, a runtime of the same
   * session (and continuation key) elsewhere continues it with `resume(checkpoint, {})`. Completed calls replay
   * instead of running again, and so do the clock and random values the code read before its latest call. A call
   * that had started but not completed may have run: it runs again only when its member is declared `@idempotent`,
   * else the resumed run pauses with an approval request (reason `in-doubt`) naming it. A call that answers with a
   * Promise starts only once the Promise the listener returns (if any) resolves, so a journal can store "started"
   * first; when it rejects (the journal could not store it), the call does not run and fails with MossError
   * `run-stopped`. Returns the function that removes the listener.
   */
  onCheckpoint(listener: (checkpoint: string) => unknown): () => void {
    this.#checkpointListeners.add(listener);
    return () => this.#checkpointListeners.delete(listener);
  }

  /**
   * Resumes a paused run: the same code runs again from the start against its log. Calls that completed return
   * their logged results without running again, the clock and random values replay, the answered requests proceed
   * (or fail with `ApprovalDenied`), new calls run for real. It may pause again. Faults of the code come back in
   * `Execution.error` (`replay-diverged` when it leaves its log); a continuation this runtime cannot resume (tampered,
   * signed with another key, expired, made for another module) and answers that do not fit its requests throw
   * `MossError` (`continuation-invalid`, `invalid-argument`).
   */
  async resume(continuation: string, answers: Answers, options: ResumeOptions = {}): Promise<Execution> {
    this.#assertOpen();
    if (this.#busy) {
      throw new MossError(
        "concurrent-execute",
        "resume() while a run is in progress on this runtime: await it first",
        {},
      );
    }
    const payload = openContinuation(continuation, this.#continuationKey, {
      displayPath: this.#module.displayPath,
      hash: this.#hash(),
      session: this.#sessionId(),
    });
    checkAnswers(payload.requests, answers);
    this.#busy = true;
    try {
      // `__moss_exec__` wraps a resumed run as it wraps an execute; the code is the continuation's.
      const request: ExecuteRequest = {
        code: payload.code,
        target: payload.target,
        localArgs: [...payload.localArgs],
        resumed: true,
        ...(options.limits === undefined ? {} : { limits: { ...options.limits } }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      };
      const hook = this.#module.hooks.__moss_exec__ as ExecHook | undefined;
      const next = (given: ExecuteRequest) => this.#resumeDefault(continuation, payload, answers, given);
      return hook ? await hook(this, request, next) : await next(request);
    } finally {
      this.#busy = false;
    }
  }

  async #resumeDefault(
    continuation: string,
    payload: ContinuationPayload,
    answers: Answers,
    request: ExecuteRequest,
  ): Promise<Execution> {
    if (
      request.code !== payload.code ||
      (request.target ?? "main") !== payload.target ||
      request.args !== undefined ||
      (request.localArgs !== undefined && request.localArgs.join("\0") !== payload.localArgs.join("\0"))
    ) {
      throw new MossError(
        "invalid-argument",
        "__moss_exec__ changed the code, target or arguments of a resumed run: a resumed run runs the code the person approved",
        {},
      );
    }
    const started = performance.now();
    const prepared = await prepareSnippet(payload.code);
    if (!("script" in prepared)) {
      throw new MossError("continuation-invalid", "the continuation's code no longer compiles", {});
    }
    claimContinuation(continuation);
    // The run starts over from the data as it was when it first began (a paused run persisted nothing).
    this.#data = {
      ...this.#data,
      ...decodeProperties(partitionProperties(payload.data, this.#dataFields()).declared, {
        maxBytes: this.#limits.maxResultBytes,
      }),
    };
    this.#persistedSnapshot = undefined;
    this.#fieldSizes.clear();
    this.#context = {
      ...this.#context,
      properties: payload.data,
      executeCode: payload.code,
      executed: false,
    };
    await this.#discardSession();
    return this.#run(
      {
        code: payload.code,
        prepared,
        target: payload.target,
        args: payload.args,
        localArgs: payload.localArgs,
        limits: this.#limitsOf(request),
        replay: payload.log,
        nondeterminism: payload.nondeterminism,
        answers,
        dataBefore: payload.data,
        ...(request.signal === undefined ? {} : { signal: request.signal }),
        requestTag: payload.requestTag ?? "",
      },
      [],
      started,
    );
  }

  /**
   * Tells the checkpoint listeners the run so far (see `onCheckpoint`); resolves once the promises they returned
   * resolved, rejects when one of them rejected (the journal could not store it); undefined when none returned one.
   */
  #checkpoint(plan: RunPlan, runLog: RunLog): Promise<unknown> | undefined {
    const now = Date.now();
    const payload: ContinuationPayload = {
      v: 1,
      module: this.#module.displayPath,
      moduleHash: this.#hash(),
      session: this.#sessionId(),
      code: plan.code,
      target: plan.target,
      args: plan.args,
      localArgs: plan.localArgs,
      log: runLog.checkpointLog(),
      nondeterminism: { clock: [...runLog.nondeterminism.clock], random: [...runLog.nondeterminism.random] },
      data: plan.dataBefore,
      requests: [],
      requestTag: plan.requestTag,
      issuedAt: now,
      expiresAt: now + this.#continuationTtlMs,
    };
    const signed = signContinuation(
      payload,
      this.#continuationKey,
      MAX_CONTINUATION_RESULTS * plan.limits.maxResultBytes,
    );
    if ("tooLarge" in signed) return undefined;
    const waits: Promise<unknown>[] = [];
    for (const listener of this.#checkpointListeners) {
      try {
        const returned = listener(signed.text);
        if (returned instanceof Promise) waits.push(returned);
      } catch (error) {
        process.emitWarning(`a checkpoint listener threw: ${(error as Error).message}`);
      }
    }
    return waits.length === 0 ? undefined : Promise.all(waits);
  }

  /** The limits of a run: the runtime's, then the request's `limits`, then its `timeoutMs`. */
  #limitsOf(request: ExecuteRequest): ExecutionLimits {
    return {
      ...this.#limits,
      ...request.limits,
      ...(request.timeoutMs === undefined ? {} : { wallTimeMs: request.timeoutMs }),
    };
  }

  async #executeDefault(request: ExecuteRequest): Promise<Execution> {
    const started = performance.now();
    const code = stripFences(request.code);
    const warnings: string[] = [];
    // GhostOS parity: the context names the code being run, and says it has not returned yet.
    this.#context = { ...this.#context, executeCode: code, executed: false };
    const fail = (error: ExecutionError): Execution =>
      this.#finish({ ok: false, returns: undefined, stdout: "", error, calls: [] }, code, warnings, started);

    const mode = request.typeCheck ?? this.#typeCheck;
    let preparing: ReturnType<typeof prepareSnippet> | undefined;
    if (mode !== "off") {
      // The execute's wall-time limit bounds its type-check too, from the execute's start: waiting for the module's
      // checker (behind other sessions' checks) and for a worker counts, so a type bomb, this session's or another's,
      // cannot hold this execute past its own limit. Loading a new worker does not count (`startTimeoutMs` bounds it).
      const wallTimeMs = request.timeoutMs ?? request.limits?.wallTimeMs ?? this.#limits.wallTimeMs;
      const timeoutMs = Math.min(
        request.limits?.typeCheckTimeoutMs ??
          this.#limits.typeCheckTimeoutMs ??
          DEFAULT_TYPE_CHECK_TIMEOUT_MS,
        wallTimeMs,
      );
      const checking = this.#moduleChecker().check(code, {
        timeoutMs,
        deadlineMs: wallTimeMs,
        startedAt: started,
      });
      // The snippet compiles on the host while its check runs in the worker (started once the check is posted); the
      // check's verdict still comes first.
      preparing = new Promise<void>((resolve) => setImmediate(resolve)).then(() => prepareSnippet(code));
      preparing.catch(() => {});
      const diagnostics = this.#hinted(await checking);
      const errors = diagnostics.filter((diagnostic) => diagnostic.severity === "error");
      if (errors.length > 0 && mode === "strict") return fail(typeError(errors, code));
      if (diagnostics.length > 0) warnings.push(renderDiagnostics(diagnostics));
    }

    const prepared = await (preparing ?? prepareSnippet(code));
    if (!("script" in prepared)) {
      return fail({
        kind: "syntax",
        name: "SyntaxError",
        message: prepared.message,
        line: prepared.line,
        column: prepared.column,
        frame: codeFrame(code, prepared.line, prepared.column, 0),
      });
    }

    const limits = this.#limitsOf(request);
    const target = request.target ?? "main";
    const membrane = this.#membraneFor();
    return this.#run(
      {
        code,
        prepared,
        target,
        args: (request.args ?? []).map((value) => membrane.encode(value)),
        localArgs: request.localArgs ?? defaultLocalArgs(code, target),
        limits,
        replay: [],
        answers: {},
        dataBefore: this.#context.properties,
        ...(request.signal === undefined ? {} : { signal: request.signal }),
        requestTag: newRequestTag(),
      },
      warnings,
      started,
    );
  }

  /** Runs a prepared snippet through a run log: to its end, to a pause, or to a fault of the code. */
  async #run(plan: RunPlan, warnings: string[], started: number): Promise<Execution> {
    const span = tracer().startSpan("moss.execute", {
      attributes: {
        "moss.module": this.#module.displayPath,
        "moss.target": plan.target,
        "moss.resumed": plan.replay.length > 0,
      },
    });
    try {
      const execution = await this.#runTraced(
        plan,
        warnings,
        started,
        otelTrace.setSpan(otelContext.active(), span),
      );
      span.setAttribute("moss.calls", execution.calls.length);
      span.setAttribute(
        "moss.outcome",
        execution.pending ? "paused" : execution.ok ? "ok" : (execution.error?.kind ?? "error"),
      );
      if (execution.error) span.setStatus({ code: SpanStatusCode.ERROR, message: execution.error.kind });
      return execution;
    } finally {
      span.end();
    }
  }

  async #runTraced(
    plan: RunPlan,
    warnings: string[],
    started: number,
    traceContext: ReturnType<typeof otelContext.active>,
  ): Promise<Execution> {
    const { code, prepared, limits } = plan;
    let session = await this.#openSession(limits);
    // Host work this run started ends with it: its log starts every call within this signal, and none after it ends.
    const runEnded = new RunSignal();
    const runLog = new RunLog({
      runSignal: runEnded,
      membrane: this.#membraneFor(),
      replay: plan.replay,
      answers: plan.answers,
      policies: this.#policies,
      lineOf: (site) => mapCallSiteToSnippet(prepared.map, site),
      frameOf: (line) => codeFrame(code, line, 1, 2),
      origin: this.#origin,
      requestTag: plan.requestTag,
      canPause: this.#durableRuns ? true : "this runtime does not pause runs (durableRuns is off)",
      traceContext,
      // A paused run's log travels in its continuation: a few results' worth, never the host's memory.
      maxLogBytes: MAX_LOG_RESULTS * limits.maxResultBytes,
      ...(this.#checkpointListeners.size === 0
        ? {}
        : {
            onSettled: () => void this.#checkpoint(plan, runLog)?.catch(() => {}),
            onStarted: () => this.#checkpoint(plan, runLog),
          }),
      ...(plan.signal === undefined ? {} : { signal: plan.signal }),
    });
    this.#runLog = runLog;
    // A new run is checkpointed as it begins too: a taker then runs it from its start instead of asking for it again.
    if (this.#checkpointListeners.size > 0 && plan.replay.length === 0 && plan.nondeterminism === undefined)
      void this.#checkpoint(plan, runLog)?.catch(() => {});
    // A stopped run ends at once: its host calls in flight see their signal abort (the run log refuses new ones) and
    // the sandbox ends its code (kind `aborted`), wherever the session runs.
    const stopMessage = "the run was stopped before it ended (its signal aborted)";
    const stop = () => {
      runEnded.end();
      session.stop?.(stopMessage);
    };
    plan.signal?.addEventListener("abort", stop, { once: true });
    const shown = new ShownImages();
    this.#shownImages = shown;
    let result: SandboxRunResult;
    const request = {
      script: prepared.script,
      filename: SNIPPET_SCRIPT,
      target: plan.target,
      args: [...plan.localArgs.map((local) => ({ local })), ...plan.args.map((wire) => ({ wire }))],
      limits,
      ...(plan.nondeterminism === undefined ? {} : { replay: plan.nondeterminism }),
    };
    try {
      try {
        result = plan.signal?.aborted ? abortedResult(stopMessage) : await session.run(request);
      } catch (error) {
        // The session's sandbox process ended (another session's run crashed it) before this run started: nothing
        // of it ran, so it runs once in a session rebuilt from the persisted context.
        if (!MossError.is(error, "sandbox-failed") || error.details.notStarted !== true) throw error;
        this.#session = undefined;
        session = await this.#openSession(limits);
        result = await session.run(request);
      }
    } finally {
      this.#runLog = undefined;
      plan.signal?.removeEventListener("abort", stop);
      // Host work the run started and nobody awaits any more (requests, tool calls) ends with it.
      runEnded.end();
      this.#shownImages = undefined;
    }
    warnings.push(...this.#installWarnings.splice(0), ...result.warnings, ...runLog.warnings);
    if (!session.alive) this.#session = undefined;
    const calls = runLog.calls;

    // A run that waits for a person but left its log (the code caught the divergence) or outgrew it cannot be
    // resumed: it fails as it is, and keeps nothing.
    const unresumable: ExecutionError | undefined =
      runLog.diverged !== undefined
        ? { kind: "replay-diverged", name: "Error", message: runLog.diverged }
        : runLog.overflowed !== undefined
          ? { kind: "output-limit", name: "RangeError", message: runLog.overflowed }
          : undefined;
    if (result.paused && unresumable !== undefined && result.error === undefined) {
      this.#recordStdout(result.stdout);
      if (runLog.diverged !== undefined) await this.#discardSession();
      return this.#finish(
        { ok: false, returns: undefined, stdout: result.stdout, error: unresumable, calls },
        code,
        warnings,
        started,
      );
    }
    if (result.paused && runLog.requests.length > 0 && result.error === undefined) {
      // Nothing of a paused run persists: the isolate it changed is gone, the data stay as they were.
      this.#recordStdout(result.stdout);
      const payload: ContinuationPayload = {
        v: 1,
        module: this.#module.displayPath,
        moduleHash: this.#hash(),
        session: this.#sessionId(),
        code,
        target: plan.target,
        args: plan.args,
        localArgs: plan.localArgs,
        log: runLog.entries,
        nondeterminism: plainNondeterminism(result.nondeterminism),
        data: plan.dataBefore,
        requests: runLog.requests,
        requestTag: plan.requestTag,
        issuedAt: Date.now(),
        expiresAt: Date.now() + this.#continuationTtlMs,
      };
      const maxPayloadBytes = MAX_CONTINUATION_RESULTS * limits.maxResultBytes;
      const signed = signContinuation(payload, this.#continuationKey, maxPayloadBytes);
      if ("tooLarge" in signed) {
        const message = `the paused run cannot be kept: its continuation (the log of host calls, the clock and random values read, the code and data) is ${signed.tooLarge} bytes, more than ${MAX_CONTINUATION_RESULTS} x maxResultBytes (${maxPayloadBytes})`;
        return this.#finish(
          {
            ok: false,
            returns: undefined,
            stdout: result.stdout,
            error: { kind: "output-limit", name: "RangeError", message },
            calls,
          },
          code,
          warnings,
          started,
        );
      }
      const pending = { requests: structuredClone(runLog.requests), continuation: signed.text };
      return this.#finish(
        { ok: false, returns: undefined, stdout: result.stdout, pending, calls },
        code,
        warnings,
        started,
      );
    }

    const membrane = this.#membrane!;
    if (result.mossData === undefined && session.alive) {
      // The isolate holds data that could not be snapshotted (too large, say): keeping it would fail every later
      // execute, so the next one starts a fresh isolate from the last persisted context.
      await session.dispose();
      this.#session = undefined;
      warnings.push(
        "moss data could not be saved after this run; the next run starts from the last saved data",
      );
    }
    let sandboxError = result.error;
    if (sandboxError === undefined && runLog.diverged !== undefined) {
      // The run left its log where no later call noticed (a call run again answered otherwise): nothing is kept.
      sandboxError = { kind: "replay-diverged", name: "Error", message: runLog.diverged };
    } else if (sandboxError === undefined && result.ok && !runLog.replayComplete) {
      sandboxError = {
        kind: "replay-diverged",
        name: "Error",
        message: `the resumed run ended before its log did: it never made call ${runLog.callCount + 1} (${runLog.firstMissed}); its effects were not kept`,
      };
    }
    const diverged = sandboxError?.kind === "replay-diverged";
    let returns: unknown;
    let decodeError: ExecutionError | undefined;
    // The isolate bounded these already; the host checks again before it builds anything (the isolate is untrusted).
    const warningsBeforeData = warnings.length;
    // The data a run left exactly as the last persisted snapshot (same wire text): nothing to decode or persist.
    const snapshot = this.#persistedSnapshot;
    const unchanged =
      !diverged &&
      result.mossData !== undefined &&
      snapshot !== undefined &&
      snapshot.wire === result.mossData &&
      snapshot.maxBytes === limits.maxResultBytes;
    // The fields the snapshot carries: the sandbox leaves out those that did not change since it last sent them.
    let changedFields: string[] | undefined;
    // A changed field refused by the declared-type rule: the isolate holds it, so the session goes after the persist.
    let misfit = false;
    try {
      if (result.mossData !== undefined && !diverged && !unchanged) {
        // Each changed field's wire text is checked and kept as sent: it is what gets persisted (no value is built).
        const sizes = new Map<string, number>();
        const data: Record<string, PersistedWire> = {};
        splitWireRecord(result.mossData, {
          maxExpandedBytes: limits.maxResultBytes,
          onRefused: (field, reason) => warnings.push(refusedFieldWarning(field, reason)),
          onField: (field, wire, size) => {
            sizes.set(field, size);
            data[field] = new PersistedWire(wire, size);
          },
        });
        const problem = this.#oversizedData(sizes, limits.maxResultBytes);
        if (problem !== undefined) warnings.push(problem);
        else {
          for (const field of this.#refuseMisfits(data, limits.maxResultBytes, warnings)) {
            delete data[field];
            sizes.delete(field);
            misfit = true;
          }
          this.#data = { ...this.#data, ...data };
          for (const [field, size] of sizes) this.#fieldSizes.set(field, size);
          changedFields = Object.keys(data);
        }
      }
      if (result.ok && result.returns !== undefined && !diverged)
        returns = membrane.decode(result.returns, limits.maxResultBytes);
    } catch (error) {
      decodeError = MossError.is(error, "wire-limit")
        ? {
            kind: "output-limit",
            name: "RangeError",
            message: `the return value cannot be sent back: ${error.message}`,
          }
        : {
            kind: "runtime",
            name: "TypeError",
            message: `the sandbox returned a malformed result: ${(error as Error).message}`,
          };
    }
    if (diverged) {
      // A run that left its log is not the run that was approved: nothing of it is kept, and its isolate goes.
      await this.#discardSession();
    } else if (!unchanged) {
      this.#persist(warnings, limits.maxResultBytes, changedFields);
      this.#persistedSnapshot =
        result.mossData !== undefined && decodeError === undefined && warnings.length === warningsBeforeData
          ? { wire: result.mossData, maxBytes: limits.maxResultBytes }
          : undefined;
      // The live session keeps the last good value too: the next run starts from the persisted data.
      if (misfit) await this.#discardSession();
    }
    if (sandboxError?.kind !== "syntax" && !diverged) this.#acceptDefinitions(code);

    const stdout = result.stdout;
    this.#recordStdout(stdout);
    const error = sandboxError ? runtimeError(sandboxError, prepared, code) : decodeError;
    return this.#finish(
      {
        ok: result.ok && !error,
        returns: error ? undefined : returns,
        stdout,
        ...(error ? { error } : {}),
        calls,
        ...(shown.images.length === 0 ? {} : { images: shown.images }),
      },
      code,
      warnings,
      started,
    );
  }

  /** The execution, with the context (GhostOS parity: it names the code run and says whether it returned normally). */
  #finish(
    partial: Omit<Execution, "context" | "durationMs" | "warnings">,
    code: string,
    warnings: string[],
    started: number,
  ): Execution {
    this.#context = { ...this.#context, executeCode: code, executed: partial.ok };
    // The context is replaced, never changed in place: its copy (a ~1 MB field costs ~20 ms) is made when read.
    const context = this.#context;
    let copy: MossContext | undefined;
    const execution = { ...partial, warnings } as Execution;
    Object.defineProperty(execution, "context", {
      enumerable: true,
      configurable: true,
      get: () => {
        copy ??= structuredClone(context);
        return copy;
      },
      set: (value: MossContext) => {
        copy = value;
      },
    });
    execution.durationMs = performance.now() - started;
    return execution;
  }

  /** Disposes the current session (its isolate holds state a new run must not see). */
  async #discardSession(): Promise<void> {
    const session = this.#session;
    this.#session = undefined;
    await session?.dispose().catch(() => {});
  }

  /** The session this runtime runs: the id of its context (kept by every context this runtime makes). */
  #sessionId(): string {
    return this.#context.id!;
  }

  #hash(): string {
    this.#moduleHash ??= createHash("sha256").update(this.#module.analysis.source).digest("base64url");
    return this.#moduleHash;
  }

  /** The membrane of this runtime (made when the first session opens, or now). */
  #membraneFor(): HostMembrane {
    if (this.#membrane) return this.#membrane;
    const declarations = this.#declarations;
    const declared = declarations.types;
    const visibleClasses = new Map<unknown, DeclaredType>();
    for (const name of visibleValueNames(this.#module)) {
      const value = this.#module.locals[name];
      if (typeof value === "function") visibleClasses.set(value, declarations.name(name));
    }
    this.#membrane = new HostMembrane({
      nearestDeclaredClass: declared.nearestDeclaredClass(visibleClasses),
      programClass: (value) => declared.programClass(value),
    });
    this.#membrane.refuseConstruction((value) => this.#isServiceClass(value));
    this.#membrane.routeCallbacks(
      (operation, handle, args) => this.#runLog?.callback(operation, handle, args) ?? outsideRun(),
    );
    return this.#membrane;
  }

  /**
   * Whether a class is a service type or extends one: the declared class of a `moss` service field, a class bound
   * in the container as a token, or the class of an injected service. Model code never constructs these (the
   * service would run a second time with arguments of the code's choice, outside what the host set up).
   */
  #isServiceClass(value: object): boolean {
    if (typeof value !== "function") return false;
    if (this.#serviceClasses === undefined) {
      this.#serviceClasses = new Set();
      for (const field of this.#module.analysis.mossClass?.fields ?? []) {
        if (field.kind !== "service") continue;
        const token = field.token?.kind === "class" ? this.#module.locals[field.token.name] : undefined;
        if (typeof token === "function") this.#serviceClasses.add(token);
      }
      for (const service of this.#services.values()) {
        const owner = typeof service === "object" && service !== null ? service.constructor : undefined;
        if (typeof owner === "function" && owner !== Object) this.#serviceClasses.add(owner);
      }
    }
    for (
      let current: unknown = value;
      typeof current === "function";
      current = Object.getPrototypeOf(current)
    ) {
      if (current === Function.prototype) break;
      if (this.#serviceClasses.has(current)) return true;
      try {
        if (this.#container.bound(current as new () => unknown)) return true;
      } catch {
        return true;
      }
    }
    return false;
  }

  /** What the sandbox calls: the run log of the run in progress (outside a run, the membrane refuses by itself). */
  #dispatch(): HostMembraneContract {
    const current = () => this.#runLog ?? this.#membraneFor();
    return {
      call: (handle, member, args, line) => current().call(handle, member, args, line),
      construct: (handle, args, line) => current().construct(handle, args, line),
      get: (handle, property, line) => current().get(handle, property, line),
      readValues: (nondeterminism) => this.#runLog?.readValues(nondeterminism),
      ask: (args, line) => {
        const log = this.#runLog;
        if (log === undefined) throw new TypeError("moss.ask can only be used while the code runs");
        return log.ask(args, line);
      },
      show: (args) => {
        const shown = this.#shownImages;
        if (shown === undefined) throw new TypeError("moss.show can only be used while the code runs");
        if (args.length > 2 * MAX_IMAGE_BYTES) throw new TypeError("moss.show: the image is too large");
        shown.add(this.#membraneFor().argumentsAsData(args));
        return { kind: "value", wire: encodeWire(undefined) };
      },
    };
  }

  async #openSession(limits: ExecutionLimits): Promise<SandboxSession> {
    if (this.#session?.alive) return this.#session;
    const driver =
      typeof this.#sandbox === "string" ? await sharedSandboxDriver(this.#sandbox) : this.#sandbox;
    // A function: the driver may rebuild the session elsewhere before a run, from the data (and the definitions, compiled
    // only when an isolate is built) as they are then.
    this.#session = await driver.open(
      async () => {
        await this.#compileDefinitions();
        return this.#sessionSetup(limits);
      },
      this.#dispatch(),
      limits,
    );
    return this.#session;
  }

  /** What a new isolate of this session installs: the module's names, the services as handles, the data. */
  #sessionSetup(limits: ExecutionLimits): SessionSetup {
    const declarations = this.#declarations;
    const membrane = this.#membraneFor();
    // Each name and each service field is encoded on its own: its handles are its own and name it (one object bound
    // to two fields is two handles, each labelled by the field the code used).
    const globals = new Map<string, string>();
    for (const name of visibleValueNames(this.#module)) {
      const wire = membrane.encodeRoot(this.#module.locals[name], name, declarations.name(name), { name });
      globals.set(name, wire);
    }
    // withLocals values have no static type: the host handed them over as they are.
    for (const [name, value] of Object.entries(this.#locals))
      globals.set(name, membrane.encodeRoot(value, name, RUNTIME, { name }));
    const services: Array<[string, string]> = [];
    for (const field of this.#module.analysis.mossClass?.fields ?? []) {
      if (field.kind !== "service") continue;
      const wire = membrane.encodeRoot(
        this.#services.get(field.name),
        `moss.${field.name}`,
        declarations.field(field.name),
        { service: field.name },
      );
      services.push([field.name, wire]);
    }
    return {
      globals: joinWireRecord([...globals]),
      mossData: this.#dataWire(limits.maxResultBytes),
      mossServices: joinWireRecord(services),
      dataFields: this.#dataFields(),
      definitions: this.#definitionsScript.script,
    };
  }

  #dataFields(): string[] {
    return (this.#module.analysis.mossClass?.fields ?? [])
      .filter((field) => field.kind === "data")
      .map((field) => field.name);
  }

  /**
   * The data fields as one wire record for a new isolate: a persisted field's wire text as it is, a host value
   * encoded (plain data only: a value with no plain-data form is refused by name, never turned into a handle).
   */
  #dataWire(maxBytes: number): string {
    const texts = new Map<string, string>();
    const values: Record<string, unknown> = {};
    let remaining = maxBytes;
    const refuse = (field: string, reason: string) =>
      this.#installWarnings.push(
        `moss.${field} ${reason}; it is not available inside the sandbox and keeps its saved value`,
      );
    for (const [field, value] of Object.entries(this.#data)) {
      if (!(value instanceof PersistedWire)) {
        values[field] = value;
        continue;
      }
      if (value.expandedBytes > remaining) {
        refuse(field, `is larger than the limit of ${maxBytes} bytes once expanded`);
        continue;
      }
      remaining -= value.expandedBytes;
      texts.set(field, value.wire);
      // The isolate sends an installed field back only once it changes: its size counts until then.
      this.#fieldSizes.set(field, value.expandedBytes);
    }
    if (Object.keys(values).length > 0) {
      const encoded = encodeWireFields(values, Object.keys(values), {
        maxExpandedBytes: remaining,
        onEncoded: (field, expandedBytes) => this.#fieldSizes.set(field, expandedBytes),
        onRefused: refuse,
      });
      splitWireRecord(encoded, { onRefused: refuse, onField: (field, wire) => texts.set(field, wire) });
    }
    return joinWireRecords(
      Object.keys(this.#data)
        .filter((field) => texts.has(field))
        .map((field) => texts.get(field)!),
    );
  }

  /**
   * Writes the data fields into the context as wire documents: only `fields` (those a snapshot carried) when given
   * and the last persist saved every field, else every field (the others keep their stored form, which nothing
   * changed). A field the isolate sent is stored as its wire text, never decoded; a host value is encoded with the
   * same codec, and the runtime keeps the text it was persisted as in its place.
   */
  #persist(warnings: string[], maxBytes = this.#limits.maxResultBytes, fields?: readonly string[]): void {
    const partial = fields !== undefined && this.#persistedClean;
    const names = partial ? fields : Object.keys(this.#data);
    const properties: Record<string, unknown> = {};
    const values: Record<string, unknown> = {};
    for (const field of names) {
      const value = this.#data[field];
      if (value instanceof PersistedWire) properties[field] = wireDocument(value.wire);
      else values[field] = value;
    }
    let clean = true;
    if (Object.keys(values).length > 0) {
      const encoded = encodeWireProperties(values, { previous: this.#context.properties, maxBytes });
      warnings.push(...encoded.warnings);
      clean = encoded.warnings.length === 0;
      Object.assign(properties, encoded.properties);
      // From now on the field is what was persisted: a new isolate starts from that text, never encoded again.
      const data = { ...this.#data };
      for (const [field, size] of Object.entries(encoded.expandedBytes))
        data[field] = new PersistedWire((encoded.properties[field] as WireDocument).wire, size);
      this.#data = data;
    }
    this.#persistedClean = clean;
    const stored = partitionProperties(this.#context.properties, this.#dataFields());
    const joined = { ...stored.undeclared, ...(partial ? stored.declared : {}), ...properties };
    this.#context = { ...this.#context, version: contextVersion(joined), properties: joined };
  }

  /**
   * The write side of the rule a context is read by (`dataFieldMisfits`, which `restoreContext` calls too): each field
   * a run changed must fit its declared type once decoded as a later compile decodes it. A field that does not is
   * refused by name (a warning of the execution says which and why) and keeps its last saved value, so a context the
   * engine wrote always loads again. Returns the refused fields.
   */
  #refuseMisfits(data: Record<string, PersistedWire>, maxBytes: number, warnings: string[]): string[] {
    const misfits = dataFieldMisfits(
      this.#module.analysis.declaredTypes,
      Object.keys(data),
      (field) => decodeProperties({ [field]: wireDocument(data[field]!.wire) }, { maxBytes })[field],
    );
    for (const { field, problem } of misfits)
      warnings.push(refusedFieldWarning(field, `does not fit its declared type (${problem})`));
    return misfits.map((misfit) => misfit.field);
  }

  /** Why the data fields a snapshot carried, with those it left unchanged, exceed the limit (undefined: they fit). */
  #oversizedData(sizes: ReadonlyMap<string, number>, maxBytes: number): string | undefined {
    let total = 2;
    for (const size of sizes.values()) total += size;
    for (const [field, size] of this.#fieldSizes) if (!sizes.has(field)) total += size;
    if (total <= maxBytes) return undefined;
    return `moss data is larger than the limit of ${maxBytes} bytes once expanded; it was not persisted and keeps its last saved value`;
  }

  #recordStdout(text: string): void {
    if (!text) return;
    this.#stdout.push(text.endsWith("\n") ? text : `${text}\n`);
    this.#stdoutBytes += text.length;
    while (this.#stdoutBytes > MAX_CUMULATIVE_STDOUT && this.#stdout.length > 1) {
      this.#stdoutBytes -= this.#stdout.shift()!.length;
    }
  }

  #moduleChecker(): WorkerModuleChecker {
    if (this.#checker) return this.#checker;
    this.#checker = new WorkerModuleChecker({
      timeoutMs: this.#limits.typeCheckTimeoutMs,
      memoryLimitBytes: this.#limits.typeCheckMemoryBytes,
      modulePath: this.#module.path,
      source: this.#module.analysis.source,
      hiddenNames: hiddenNames(this.#module),
      locals: Object.fromEntries(
        Object.entries(this.#locals).map(([name, value]) => [name, typeOfLocal(value)]),
      ),
      serviceClasses: visibleValueNames(this.#module).filter((name) => {
        const value = this.#module.locals[name];
        return typeof value === "function" && this.#isServiceClass(value);
      }),
    });
    if (this.#definitions.text !== "") this.#checker.define(this.#definitions.text);
    return this.#checker;
  }

  /**
   * Definitions made by code that ran: the session's record takes those it keeps; the checker gets the record as it
   * is now, the context saves it, and a new isolate of the session evaluates it compiled (`#compileDefinitions`).
   */
  #acceptDefinitions(code: string): void {
    if (!this.#definitions.accept(code)) return;
    this.#context = this.#withDefinitions(this.#context);
    this.#checker?.define(this.#definitions.text);
  }

  /** A context carrying the session's kept definitions (none: no field). */
  #withDefinitions(context: MossContext): MossContext {
    const { definitions: _, ...rest } = context;
    const text = this.#definitions.text;
    return text === "" ? rest : { ...rest, definitions: text };
  }

  /** Compiles the record into the script a new isolate evaluates, unless it is compiled already. */
  async #compileDefinitions(): Promise<void> {
    const text = this.#definitions.text;
    if (this.#definitionsScript.text === text) return;
    const prepared = text === "" ? undefined : await prepareSnippet(text);
    // Every kept definition came from a snippet that compiled; the record compiles as they did.
    const script = prepared !== undefined && "script" in prepared ? prepared.script : "";
    this.#definitionsScript = { text, script };
  }

  /** Diagnostics of a name an earlier snippet declared but the session did not keep say why. */
  #hinted(diagnostics: Diagnostic[]): Diagnostic[] {
    return diagnostics.map((diagnostic) => {
      if (diagnostic.code !== 2304 && diagnostic.code !== 2552) return diagnostic;
      const name = /'([^']+)'/.exec(diagnostic.message)?.[1];
      const reason = name === undefined ? undefined : this.#definitions.notKept(name);
      if (reason === undefined) return diagnostic;
      return {
        ...diagnostic,
        message: `${diagnostic.message} An earlier snippet declared '${name}', but it is not kept between executes: ${reason}. Keep state in a \`moss\` data field, or define it again in this snippet.`,
      };
    });
  }

  #assertOpen(): void {
    if (this.#closed)
      throw new MossError("runtime-closed", `this MossRuntime (${this.modulePath}) is closed`, {});
  }
}

/** The clock and random log a sandbox reported, as plain numbers (a sandbox process is not trusted). */
function plainNondeterminism(given: unknown): Nondeterminism {
  const numbers = (value: unknown) =>
    Array.isArray(value)
      ? value.filter((item): item is number => typeof item === "number").slice(0, 1_000_000)
      : [];
  const record = (given ?? {}) as { clock?: unknown; random?: unknown };
  return { clock: numbers(record.clock), random: numbers(record.random) };
}

/** A data field as persisted: its wire text (checked, plain data) and its expanded size. */
class PersistedWire {
  constructor(
    readonly wire: string,
    readonly expandedBytes: number,
  ) {}
}

function refusedFieldWarning(field: string, reason: string): string {
  return `moss.${field} ${reason}; it was not persisted and keeps its last saved value`;
}

/**
 * The type the checker gives a `withLocals` value: exact for primitives, callable for functions, `any` otherwise
 * (a host object's shape is not known statically; the membrane still exposes only its public members).
 */
function typeOfLocal(value: unknown): string {
  switch (typeof value) {
    case "string":
    case "number":
    case "boolean":
    case "bigint":
      return typeof value;
    case "function":
      return /^class[\s{]/.test(Function.prototype.toString.call(value)) ? "any" : "(...args: any[]) => any";
    case "undefined":
      return "undefined";
    default:
      return value === null ? "null" : Array.isArray(value) ? "any[]" : "any";
  }
}

/** The pattern of a target declared without parameters, by target: compiling it cost ~50 µs of every execute. */
const parameterlessDeclarations = new Map<string, RegExp>();

/** `moss` is passed when the target declares a parameter (a bare `main()` gets nothing). */
function defaultLocalArgs(code: string, target: string): string[] {
  let declaration = parameterlessDeclarations.get(target);
  if (declaration === undefined) {
    declaration = new RegExp(
      `function\\s*\\*?\\s*${target}\\s*\\(\\s*\\)|${target}\\s*=\\s*(?:async\\s*)?\\(\\s*\\)\\s*=>`,
    );
    if (parameterlessDeclarations.size < 64) parameterlessDeclarations.set(target, declaration);
  }
  return declaration.test(code) ? [] : ["moss"];
}

function typeError(errors: Diagnostic[], code: string): ExecutionError {
  const first = errors[0]!;
  const syntax = errors.every((diagnostic) => diagnostic.code >= 1000 && diagnostic.code < 2000);
  return {
    kind: syntax ? "syntax" : "type",
    name: syntax ? "SyntaxError" : "TypeError",
    message: renderDiagnostics(errors),
    line: first.line,
    column: first.column,
    frame: first.frame ?? codeFrame(code, first.line, first.column, 0),
    diagnostics: errors,
  };
}

function runtimeError(
  error: NonNullable<Awaited<ReturnType<SandboxSession["run"]>>["error"]>,
  prepared: PreparedSnippet,
  code: string,
): ExecutionError {
  const mapped = mapStack(error.stack, prepared.map);
  // Faults of the sandbox machinery (a crash reports the sandbox process's stderr) may name host files; the model's
  // own errors are its text, and host errors were cleaned when they crossed the membrane.
  const message = error.kind === "runtime" ? error.message : redactHostPaths(error.message);
  const located: ExecutionError = { kind: error.kind, name: error.name, message };
  if (mapped.stack) located.stack = mapped.stack;
  if (mapped.line !== undefined && mapped.column !== undefined) {
    located.line = mapped.line;
    located.column = mapped.column;
    located.frame = codeFrame(code, mapped.line, mapped.column, 0);
  }
  return located;
}
