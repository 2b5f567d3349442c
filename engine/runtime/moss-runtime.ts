import { createHash, randomUUID } from "node:crypto";
import path from "node:path";
import { context as otelContext, trace as otelTrace, SpanStatusCode } from "@opentelemetry/api";
import { type Container, destroyOnce } from "../../container/index.ts";
import { checkAnswers } from "../answers.ts";
import type { WorkerModuleChecker } from "../check/index.ts";
import { contextVersion, createContext } from "../context/index.ts";
import { codeFrame, MossError } from "../errors.ts";
import { stripFences } from "../fenced-code.ts";
import { MAX_IMAGE_BYTES, ShownImages } from "../image-content.ts";
import { addHostRoot, encodeWire } from "../membrane/index.ts";
import { type CompiledModule, visibleValueNames } from "../module/index.ts";
import type { Injection } from "../moss.ts";
import { MossPrompter } from "../prompter/index.ts";
import type {
  HostMembrane,
  SandboxDriver,
  SandboxRunResult,
  SandboxSession,
  SessionSetup,
} from "../sandbox/index.ts";
import { abortedResult } from "../sandbox/index.ts";
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
  type TracePayloads,
  type TypeCheckMode,
} from "../types.ts";
import { checkedSnippet } from "./checked-snippet.ts";
import {
  type ContinuationPayload,
  claimContinuation,
  continuationKey,
  DEFAULT_CONTINUATION_TTL_MS,
  openContinuation,
} from "./continuation.ts";
import { type DeclaredType, type ModuleDeclarations, moduleDeclarations } from "./declared-members.ts";
import { HandleMembrane, outsideRun } from "./host-membrane.ts";
import { newRequestTag } from "./log-entry.ts";
import { mapCallSiteToSnippet, type PreparedSnippet, prepareSnippet } from "./prepare-snippet.ts";
import { PrintedOutput } from "./printed-output.ts";
import {
  assertResumedAsPaused,
  type ContinuationOwner,
  plainNondeterminism,
  resumedPlan,
  resumedRequest,
  signRun,
  tellCheckpoint,
} from "./run-continuation.ts";
import { RunLog, tracer } from "./run-log.ts";
import { defaultLocalArgs, type RunPlan } from "./run-plan.ts";
import { RunSignal } from "./run-signal.ts";
import { decodeFailure, execution, runtimeError, runVerdict } from "./run-verdict.ts";
import type { ExecHook, MossRuntimeOptions, ResumeOptions } from "./runtime-options.ts";
import { SessionData } from "./session-data.ts";
import { SessionDefinitions } from "./session-definitions.ts";
import { installedNames, moduleChecker, serviceClassTest } from "./session-setup.ts";
import { sharedSandboxDriver } from "./shared-sandbox.ts";

/** Node 20.4+ and 22+ define Symbol.asyncDispose; older runtimes get Node's registered symbol. */
const asyncDispose: typeof Symbol.asyncDispose =
  Symbol.asyncDispose ?? (Symbol.for("nodejs.asyncDispose") as typeof Symbol.asyncDispose);

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
  readonly #tracePayloads: TracePayloads;
  /** Names this runtime's handles in run logs: a logged result holding them replays only here. */
  readonly #origin = randomUUID();
  #moduleHash: string | undefined;
  /** The log of the run in progress: the session's host calls go through it. */
  #runLog: RunLog | undefined;
  /** Images the run in progress showed with `moss.show`. */
  #shownImages: ShownImages | undefined;
  readonly #checkpointListeners = new Set<(checkpoint: string) => unknown>();
  /** The data fields: what a new isolate installs, what a run changed, what the context persists. */
  readonly #data: SessionData;
  #context: MossContext;
  #hostMoss: Record<string, unknown> | undefined;
  #prompter: MossPrompter | undefined;
  #checker: WorkerModuleChecker | undefined;
  /** The one record of the session's kept definitions: the checker and every new isolate of the session get it. */
  readonly #definitions: SessionDefinitions;
  #membrane: HandleMembrane | undefined;
  /** Whether a class is one model code may never construct (see `serviceClassTest`). */
  readonly #isServiceClass: (value: object) => boolean;
  readonly #declarations: ModuleDeclarations;
  #session: SandboxSession | undefined;
  readonly #printed = new PrintedOutput();
  #busy = false;
  #closed = false;
  #closing: Promise<void> | undefined;

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
    this.#tracePayloads = options.tracePayloads ?? false;
    addHostRoot(path.dirname(options.module.path));
    this.#declarations = moduleDeclarations(options.module.analysis.declaredTypes);
    this.#data = new SessionData(options.module);
    this.#isServiceClass = serviceClassTest(options.module, this.#services, options.container);
    const context = options.context ?? createContext(options.module.displayPath);
    // The session's identity: made once, then saved with the context (old documents without one get one here).
    this.#context = { ...context, id: context.id ?? randomUUID(), module: options.module.displayPath };
    this.#definitions = new SessionDefinitions(context.definitions);
    this.#context = this.#definitions.into(this.#context);
  }

  /** Called by the compiler: injects services (calling `onInject`) and the initial data fields. */
  async initialize(services: Map<string, unknown>, data: Record<string, unknown>): Promise<void> {
    for (const [field, service] of services) {
      const injection = service as Injection | undefined;
      if (injection && typeof injection.onInject === "function") await injection.onInject(this, field);
      this.#services.set(field, service);
    }
    this.#data.replace(data);
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
    this.#data.adopt(this.hostMoss(), leftOut);
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
    return this.#definitions.hint(await this.#moduleChecker().check(stripFences(code)));
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
    return this.#hooked(request, (given) => this.#executeDefault(given));
  }

  /** Runs a request through the module's `__moss_exec__` (when it has one), one run at a time. */
  async #hooked(
    request: ExecuteRequest,
    next: (request: ExecuteRequest) => Promise<Execution>,
  ): Promise<Execution> {
    this.#busy = true;
    try {
      const hook = this.#module.hooks.__moss_exec__ as ExecHook | undefined;
      return hook ? await hook(this, request, next) : await next(request);
    } finally {
      this.#busy = false;
    }
  }

  /** Everything the model's code printed on this runtime, across executions. */
  dumpStdOutput(): string {
    return this.#printed.text();
  }

  /** The current MossContext (a copy). */
  dumpContext(): MossContext {
    return structuredClone(this.#context);
  }

  /** The names of `moss`'s declared data fields (what a context's properties persist of this module). */
  dataFields(): string[] {
    return this.#data.fields();
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
    // `__moss_exec__` wraps a resumed run as it wraps an execute; the code is the continuation's.
    return this.#hooked(resumedRequest(payload, options), (given) =>
      this.#resumeDefault(continuation, payload, answers, given),
    );
  }

  async #resumeDefault(
    continuation: string,
    payload: ContinuationPayload,
    answers: Answers,
    request: ExecuteRequest,
  ): Promise<Execution> {
    assertResumedAsPaused(request, payload);
    const started = performance.now();
    const prepared = await prepareSnippet(payload.code);
    if (!("script" in prepared)) {
      throw new MossError("continuation-invalid", "the continuation's code no longer compiles", {});
    }
    claimContinuation(continuation);
    // The run starts over from the data as it was when it first began (a paused run persisted nothing).
    this.#data.restore(payload.data, this.#limits.maxResultBytes);
    this.#context = {
      ...this.#context,
      properties: payload.data,
      executeCode: payload.code,
      executed: false,
    };
    await this.#discardSession();
    const plan = resumedPlan(payload, prepared, answers, this.#limitsOf(request), request.signal);
    return this.#run(plan, [], started);
  }

  /** Tells the checkpoint listeners the run so far, waiting for nothing (see `onCheckpoint`, `tellCheckpoint`). */
  #checkpoint(plan: RunPlan, runLog: RunLog): Promise<unknown> | undefined {
    const signed = signRun(this.#continuationOwner(), plan, {
      log: runLog.checkpointLog(),
      nondeterminism: { clock: [...runLog.nondeterminism.clock], random: [...runLog.nondeterminism.random] },
      requests: [],
    });
    return "tooLarge" in signed ? undefined : tellCheckpoint(this.#checkpointListeners, signed.text);
  }

  /** Whose continuations this runtime signs, and how. */
  #continuationOwner(): ContinuationOwner {
    return {
      module: this.#module.displayPath,
      moduleHash: this.#hash(),
      session: this.#sessionId(),
      key: this.#continuationKey,
      ttlMs: this.#continuationTtlMs,
    };
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

    const checked = await checkedSnippet(
      code,
      request,
      {
        mode: request.typeCheck ?? this.#typeCheck,
        limits: this.#limits,
        checker: () => this.#moduleChecker(),
        hint: (diagnostics) => this.#definitions.hint(diagnostics),
        started,
      },
      warnings,
    );
    if ("error" in checked) return fail(checked.error);
    const { prepared } = checked;

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
      positionOf: (site) => mapCallSiteToSnippet(prepared.map, site),
      frameOf: (at) => codeFrame(code, at.line, at.column, 2),
      origin: this.#origin,
      requestTag: plan.requestTag,
      canPause: this.#durableRuns ? true : "this runtime does not pause runs (durableRuns is off)",
      tracePayloads: this.#tracePayloads,
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
    warnings.push(...this.#data.installWarnings.splice(0), ...result.warnings, ...runLog.warnings);
    if (!session.alive) this.#session = undefined;
    return this.#conclude(plan, result, runLog, shown, warnings, started);
  }

  /** What a run that ended (or paused) leaves: a pause's continuation, or its data persisted, its definitions kept. */
  async #conclude(
    plan: RunPlan,
    result: SandboxRunResult,
    runLog: RunLog,
    shown: ShownImages,
    warnings: string[],
    started: number,
  ): Promise<Execution> {
    const { code, limits } = plan;
    const calls = runLog.calls;
    const verdict = runVerdict(result, runLog);
    if (verdict.kind !== "ended") {
      // Nothing of a paused run persists: the isolate it changed is gone, the data stay as they were.
      this.#printed.record(result.stdout);
      const failed = (error: ExecutionError) =>
        this.#finish(
          { ok: false, returns: undefined, stdout: result.stdout, error, calls },
          code,
          warnings,
          started,
        );
      if (verdict.kind === "unkept") {
        if (verdict.diverged) await this.#discardSession();
        return failed(verdict.error);
      }
      const signed = signRun(this.#continuationOwner(), plan, {
        log: runLog.entries,
        nondeterminism: plainNondeterminism(result.nondeterminism),
        requests: runLog.requests,
      });
      if ("tooLarge" in signed)
        return failed({ kind: "output-limit", name: "RangeError", message: signed.message });
      const pending = { requests: structuredClone(runLog.requests), continuation: signed.text };
      return this.#finish(
        { ok: false, returns: undefined, stdout: result.stdout, pending, calls },
        code,
        warnings,
        started,
      );
    }

    const session = this.#session;
    if (result.mossData === undefined && session?.alive) {
      // The isolate holds data that could not be snapshotted (too large, say): keeping it would fail every later
      // execute, so the next one starts a fresh isolate from the last persisted context.
      await session.dispose();
      this.#session = undefined;
      warnings.push(
        "moss data could not be saved after this run; the next run starts from the last saved data",
      );
    }
    const { diverged } = verdict;
    let returns: unknown;
    let decodeError: ExecutionError | undefined;
    // The isolate bounded these already; the host checks again before it builds anything (the isolate is untrusted).
    const warningsBeforeData = warnings.length;
    // The data a run left exactly as the last persisted snapshot (same wire text): nothing to decode or persist.
    const unchanged = !diverged && this.#data.unchanged(result.mossData, limits.maxResultBytes);
    // The fields the snapshot carries: the sandbox leaves out those that did not change since it last sent them.
    let changedFields: string[] | undefined;
    // A changed field refused by the declared-type rule: the isolate holds it, so the session goes after the persist.
    let misfit = false;
    try {
      if (result.mossData !== undefined && !diverged && !unchanged)
        ({ changed: changedFields, misfit } = this.#data.take(
          result.mossData,
          limits.maxResultBytes,
          warnings,
        ));
      if (result.ok && result.returns !== undefined && !diverged)
        returns = this.#membrane!.decode(result.returns, limits.maxResultBytes);
    } catch (error) {
      decodeError = decodeFailure(error);
    }
    if (diverged) {
      // A run that left its log is not the run that was approved: nothing of it is kept, and its isolate goes.
      await this.#discardSession();
    } else if (!unchanged) {
      this.#persist(warnings, limits.maxResultBytes, changedFields);
      this.#data.persisted(
        result.mossData !== undefined && decodeError === undefined && warnings.length === warningsBeforeData
          ? { wire: result.mossData, maxBytes: limits.maxResultBytes }
          : undefined,
      );
      // The live session keeps the last good value too: the next run starts from the persisted data.
      if (misfit) await this.#discardSession();
    }
    if (verdict.error?.kind !== "syntax" && !diverged) this.#acceptDefinitions(code, plan.prepared.parsed);

    this.#printed.record(result.stdout);
    const error = verdict.error ? runtimeError(verdict.error, plan.prepared, code) : decodeError;
    return this.#finish(
      {
        ok: result.ok && !error,
        returns: error ? undefined : returns,
        stdout: result.stdout,
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
    return execution(partial, this.#context, warnings, started);
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
  #membraneFor(): HandleMembrane {
    if (this.#membrane) return this.#membrane;
    const declarations = this.#declarations;
    const declared = declarations.types;
    const visibleClasses = new Map<unknown, DeclaredType>();
    for (const name of visibleValueNames(this.#module)) {
      const value = this.#module.locals[name];
      if (typeof value === "function") visibleClasses.set(value, declarations.name(name));
    }
    this.#membrane = new HandleMembrane({
      nearestDeclaredClass: declared.nearestDeclaredClass(visibleClasses),
      programClass: (value) => declared.programClass(value),
    });
    this.#membrane.refuseConstruction((value) => this.#isServiceClass(value));
    this.#membrane.routeCallbacks(
      (operation, handle, args) => this.#runLog?.callback(operation, handle, args) ?? outsideRun(),
    );
    return this.#membrane;
  }

  /** What the sandbox calls: the run log of the run in progress (outside a run, the membrane refuses by itself). */
  #dispatch(): HostMembrane {
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
      async () => this.#sessionSetup(limits, await this.#definitions.script()),
      this.#dispatch(),
      limits,
    );
    return this.#session;
  }

  /** What a new isolate of this session installs: the module's names, the services as handles, the data. */
  #sessionSetup(limits: ExecutionLimits, definitions: string): SessionSetup {
    const membrane = this.#membraneFor();
    const names = installedNames(this.#module, this.#locals, this.#services, membrane, this.#declarations);
    return {
      globals: names.globals,
      mossData: this.#data.installWire(limits.maxResultBytes),
      mossServices: names.mossServices,
      dataFields: this.#data.fields(),
      definitions,
    };
  }

  /** Writes the data fields into the context as wire documents (see `SessionData.persist`). */
  #persist(warnings: string[], maxBytes = this.#limits.maxResultBytes, fields?: readonly string[]): void {
    const properties = this.#data.persist(this.#context.properties, warnings, maxBytes, fields);
    this.#context = { ...this.#context, version: contextVersion(properties), properties };
  }

  /** The module's checker for this session (made when first asked for), given the session's definitions. */
  #moduleChecker(): WorkerModuleChecker {
    if (this.#checker) return this.#checker;
    this.#checker = moduleChecker(this.#module, this.#locals, this.#limits, this.#isServiceClass);
    if (this.#definitions.text !== "") this.#checker.define(this.#definitions.text);
    return this.#checker;
  }

  /**
   * Definitions made by code that ran: the session's record takes those it keeps; the checker gets the record as it
   * is now, the context saves it, and a new isolate of the session evaluates it compiled (`definitions.script()`).
   */
  #acceptDefinitions(code: string, parsed: PreparedSnippet["parsed"]): void {
    if (!this.#definitions.accept(code, parsed)) return;
    this.#context = this.#definitions.into(this.#context);
    this.#checker?.define(this.#definitions.text);
  }

  #assertOpen(): void {
    if (this.#closed)
      throw new MossError("runtime-closed", `this MossRuntime (${this.modulePath}) is closed`, {});
  }
}
