import path from "node:path";
import { type Container, destroyOnce } from "../../container/index.ts";
import { renderDiagnostics, WorkerModuleChecker } from "../check/index.ts";
import { type CompiledModule, hiddenNames, visibleValueNames } from "../compiler/compiled-module.ts";
import { createContext, encodeProperties } from "../context/index.ts";
import { codeFrame, MossError } from "../errors.ts";
import type { Injection } from "../moss.ts";
import { MossPrompter } from "../prompter/moss-prompter.ts";
import { addHostRoot, redactHostPaths } from "../sandbox/host-error.ts";
import type { SandboxDriver, SandboxSession } from "../sandbox/sandbox.ts";
import { decodeWire, encodeWireFields } from "../sandbox/wire.ts";
import {
  DEFAULT_LIMITS,
  type Diagnostic,
  type ExecuteRequest,
  type Execution,
  type ExecutionError,
  type ExecutionLimits,
  type MossContext,
  type TypeCheckMode,
} from "../types.ts";
import { type DeclaredType, DeclaredTypes, RUNTIME } from "./declared-members.ts";
import { HostMembrane } from "./host-membrane.ts";
import {
  mapStack,
  type PreparedSnippet,
  prepareSnippet,
  SNIPPET_SCRIPT,
  stripFences,
} from "./prepare-snippet.ts";
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
}

type ExecHook = (
  runtime: MossRuntime,
  request: ExecuteRequest,
  next: (request: ExecuteRequest) => Promise<Execution>,
) => Promise<Execution>;

const MAX_CUMULATIVE_STDOUT = 1024 * 1024;
/** Snippets that ran with type-checking off, kept so a later check still sees their definitions. */
const MAX_UNCHECKED_SNIPPETS = 256;

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
  #data: Record<string, unknown> = {};
  #context: MossContext;
  #hostMoss: Record<string, unknown> | undefined;
  #prompter: MossPrompter | undefined;
  #checker: WorkerModuleChecker | undefined;
  readonly #unchecked: string[] = [];
  #membrane: HostMembrane | undefined;
  readonly #declaredTypes: DeclaredTypes;
  #session: SandboxSession | undefined;
  #stdout: string[] = [];
  /** Data fields refused when the session was installed, reported with the next execution. */
  readonly #installWarnings: string[] = [];
  #stdoutBytes = 0;
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
    addHostRoot(path.dirname(options.module.path));
    this.#declaredTypes = new DeclaredTypes(options.module.analysis.declaredTypes.program);
    this.#context = {
      ...(options.context ?? createContext(options.module.displayPath)),
      module: options.module.displayPath,
    };
  }

  /** Called by the compiler: injects services (calling `onInject`) and the initial data fields. */
  async initialize(services: Map<string, unknown>, data: Record<string, unknown>): Promise<void> {
    for (const [field, service] of services) {
      const injection = service as Injection | undefined;
      if (injection && typeof injection.onInject === "function") await injection.onInject(this, field);
      this.#services.set(field, service);
    }
    this.#data = data;
    const moss = new this.#module.mossClass() as Record<string, unknown>;
    for (const [field, service] of this.#services) moss[field] = service;
    Object.assign(moss, data);
    this.#hostMoss = moss;
  }

  /** The host-side `moss` handed to `__moss_compiled__` (services and data, before the first execute). */
  hostMoss(): Record<string, unknown> {
    return this.#hostMoss ?? {};
  }

  /** Takes the data fields back from the host-side moss (after `__moss_compiled__`) and persists them. */
  adoptHostData(): void {
    const moss = this.hostMoss();
    for (const field of this.#dataFields()) if (field in moss) this.#data[field] = moss[field];
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
    return this.#moduleChecker().check(stripFences(code));
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

  async #executeDefault(request: ExecuteRequest): Promise<Execution> {
    const started = performance.now();
    const code = stripFences(request.code);
    const warnings: string[] = [];
    // GhostOS parity: the context names the code being run and says whether it returned normally.
    this.#context = { ...this.#context, executeCode: code, executed: false };
    const finish = (
      partial: Omit<Execution, "context" | "durationMs" | "warnings" | "calls"> & {
        calls?: Execution["calls"];
      },
    ): Execution => {
      this.#context = { ...this.#context, executed: partial.ok };
      return {
        calls: [],
        ...partial,
        warnings,
        context: this.dumpContext(),
        durationMs: performance.now() - started,
      };
    };

    const mode = request.typeCheck ?? this.#typeCheck;
    if (mode !== "off") {
      const timeoutMs = request.limits?.typeCheckTimeoutMs ?? this.#limits.typeCheckTimeoutMs;
      const diagnostics = await this.#moduleChecker().check(code, { timeoutMs });
      const errors = diagnostics.filter((diagnostic) => diagnostic.severity === "error");
      if (errors.length > 0 && mode === "strict") {
        return finish({ ok: false, returns: undefined, stdout: "", error: typeError(errors, code) });
      }
      if (diagnostics.length > 0) warnings.push(renderDiagnostics(diagnostics));
    }

    const prepared = await prepareSnippet(code);
    if (!("script" in prepared)) {
      return finish({
        ok: false,
        returns: undefined,
        stdout: "",
        error: {
          kind: "syntax",
          name: "SyntaxError",
          message: prepared.message,
          line: prepared.line,
          column: prepared.column,
          frame: codeFrame(code, prepared.line, prepared.column, 0),
        },
      });
    }

    const limits: ExecutionLimits = {
      ...this.#limits,
      ...request.limits,
      ...(request.timeoutMs === undefined ? {} : { wallTimeMs: request.timeoutMs }),
    };
    const target = request.target ?? "main";
    const session = await this.#openSession(limits);
    const membrane = this.#membrane!;
    const args = [
      ...(request.localArgs ?? defaultLocalArgs(code, target)).map((local) => ({ local })),
      ...(request.args ?? []).map((value) => ({ wire: membrane.encode(value) })),
    ];
    const result = await session.run({
      script: prepared.script,
      filename: SNIPPET_SCRIPT,
      target,
      args,
      limits,
    });
    warnings.push(...this.#installWarnings.splice(0), ...result.warnings);
    if (result.mossData === undefined && session.alive) {
      // The isolate holds data that could not be snapshotted (too large, say): keeping it would fail every later
      // execute, so the next one starts a fresh isolate from the last persisted context.
      await session.dispose();
      warnings.push(
        "moss data could not be saved after this run; the next run starts from the last saved data",
      );
    }
    if (!session.alive) this.#session = undefined;
    let returns: unknown;
    let decodeError: ExecutionError | undefined;
    // The isolate bounded these already; the host checks again before it builds anything (the isolate is untrusted).
    try {
      if (result.mossData !== undefined) {
        const data = decodeWire(result.mossData, {
          maxExpandedBytes: limits.maxResultBytes,
          onRefused: (field, reason) => warnings.push(refusedFieldWarning(field, reason)),
        });
        this.#data = { ...this.#data, ...(data as object) };
      }
      if (result.ok && result.returns !== undefined)
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
    this.#persist(warnings, limits.maxResultBytes);
    if (result.error?.kind !== "syntax") this.#acceptDefinitions(code);

    const stdout = result.stdout;
    this.#recordStdout(stdout);
    const error = result.error ? runtimeError(result.error, prepared, code) : decodeError;
    return finish({
      ok: result.ok && !error,
      returns: error ? undefined : returns,
      stdout,
      ...(error ? { error } : {}),
    });
  }

  async #openSession(limits: ExecutionLimits): Promise<SandboxSession> {
    if (this.#session?.alive) return this.#session;
    const driver =
      typeof this.#sandbox === "string" ? await sharedSandboxDriver(this.#sandbox) : this.#sandbox;
    const declared = this.#declaredTypes;
    const { names: nameTypes, fields: fieldTypes } = this.#module.analysis.declaredTypes;
    const globals: Record<string, unknown> = {};
    const globalTypes = new Map<string, DeclaredType>();
    const visibleClasses = new Map<unknown, DeclaredType>();
    for (const name of visibleValueNames(this.#module)) {
      const value = this.#module.locals[name];
      globals[name] = value;
      const type = nameTypes.get(name);
      if (!type) continue;
      globalTypes.set(name, declared.of(type));
      if (typeof value === "function") visibleClasses.set(value, declared.of(type));
    }
    this.#membrane ??= new HostMembrane({
      nearestDeclaredClass: declared.nearestDeclaredClass(visibleClasses),
      programClass: (value) => declared.programClass(value),
    });
    const membrane = this.#membrane;
    // withLocals values have no static type: the host handed them over as they are.
    for (const [name, value] of Object.entries(this.#locals)) {
      globals[name] = value;
      globalTypes.set(name, RUNTIME);
    }
    const services: Record<string, unknown> = {};
    const serviceTypes = new Map<string, DeclaredType>();
    for (const field of this.#module.analysis.mossClass?.fields ?? []) {
      if (field.kind !== "service") continue;
      services[field.name] = this.#services.get(field.name);
      const type = fieldTypes.get(field.name);
      if (type) serviceTypes.set(field.name, declared.of(type));
    }
    this.#session = await driver.open(
      {
        globals: membrane.encode(globals, "globals", declared.record(globalTypes)),
        // Plain data only: a value with no plain-data form is refused by name, never turned into a handle.
        mossData: encodeWireFields(this.#data, Object.keys(this.#data), {
          maxExpandedBytes: limits.maxResultBytes,
          onRefused: (field, reason) =>
            this.#installWarnings.push(
              `moss.${field} ${reason}; it is not available inside the sandbox and keeps its saved value`,
            ),
        }),
        mossServices: membrane.encode(services, "moss", declared.record(serviceTypes)),
        dataFields: this.#dataFields(),
      },
      membrane,
      limits,
    );
    return this.#session;
  }

  #dataFields(): string[] {
    return (this.#module.analysis.mossClass?.fields ?? [])
      .filter((field) => field.kind === "data")
      .map((field) => field.name);
  }

  #persist(warnings: string[], maxBytes = this.#limits.maxResultBytes): void {
    const encoded = encodeProperties(this.#data, { previous: this.#context.properties, maxBytes });
    warnings.push(...encoded.warnings);
    this.#context = { ...this.#context, properties: encoded.properties };
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
    });
    for (const snippet of this.#unchecked.splice(0)) this.#checker.accept(snippet);
    return this.#checker;
  }

  /** Definitions made by code that ran: later checks see them (kept for later while no checker exists yet). */
  #acceptDefinitions(code: string): void {
    if (this.#checker) this.#checker.accept(code);
    else if (this.#unchecked.push(code) > MAX_UNCHECKED_SNIPPETS) this.#unchecked.shift();
  }

  #assertOpen(): void {
    if (this.#closed)
      throw new MossError("runtime-closed", `this MossRuntime (${this.modulePath}) is closed`, {});
  }
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

/** `moss` is passed when the target declares a parameter (a bare `main()` gets nothing). */
function defaultLocalArgs(code: string, target: string): string[] {
  const declaration = new RegExp(
    `function\\s*\\*?\\s*${target}\\s*\\(\\s*\\)|${target}\\s*=\\s*(?:async\\s*)?\\(\\s*\\)\\s*=>`,
  );
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
