import { readFile } from "node:fs/promises";
import path from "node:path";
import { Container, type Provider, type Token, tokenName } from "../../container/index.ts";
import { locatedMessage, MossError } from "../errors.ts";
import { isReachableGlobalName, MOSS_NAME_PREFIX } from "../membrane/index.ts";
import {
  type CompiledModule,
  dataFieldMisfits,
  HOOK_NAMES,
  type HookName,
  type ModuleAnalysis,
  type MossField,
  readCheckedModule,
} from "../module/index.ts";
import { Moss as MossBase } from "../moss.ts";
import { continuationKey, MossRuntime, type MossRuntimeOptions } from "../runtime/index.ts";
import {
  type CallPolicy,
  DEFAULT_LIMITS,
  type ExecutionLimits,
  type MossContext,
  type TypeCheckMode,
} from "../types.ts";
import { loadModule } from "./load-module.ts";
import type { ModuleCache } from "./module-cache.ts";
import { mismatchError, restoreContext } from "./restore-context.ts";

/** Options of a compiler; everything but the container is passed on to the runtime. */
export interface MossCompilerOptions {
  /** The compiler works in a child of this container (a fresh one when absent). */
  container?: Container;
  /** How type errors in the model's code are treated. Default `strict`. */
  typeCheck?: TypeCheckMode;
  /** Default limits of every execution. */
  limits?: Partial<ExecutionLimits>;
  /** Where isolates run: `process` (supervised child processes, the default) or `in-process`. */
  sandbox?: MossRuntimeOptions["sandbox"];
  /**
   * Signs the continuations of paused runs (HMAC-SHA256, at least 16 bytes). Give the same key to every process that
   * must resume another's runs; without one, each process signs with a random key of its own.
   */
  continuationKey?: string | Uint8Array;
  /** How long a paused run can be resumed, in milliseconds. Default one hour. */
  continuationTtlMs?: number;
  /** Whether runs pause for approvals and `moss.ask` (default true); when false such calls are denied instead. */
  durableRuns?: boolean;
  /**
   * Whether `execution.calls` keeps each host call's arguments, result and error, bounded and passed through
   * `redact` when given (see `HostCallRecord.args`). Default false: sizes only.
   */
  tracePayloads?: MossRuntimeOptions["tracePayloads"];
  /**
   * Runs the module's `__moss_test_setup__(compiler)` before its `__moss_compile__`: the fakes a test binds in place
   * of the production host setup (`moss test`, `MossTestSuite`). Default false.
   */
  testSetup?: boolean;
  /**
   * Shares the module's analysis, type-check, loaded instance and reflected prompt with every compiler given the
   * same cache (see `ModuleCache` for what sessions then share). Default: this compile reads and loads its own.
   */
  moduleCache?: ModuleCache;
}

const NON_FUNCTION_HOOKS: readonly HookName[] = ["__moss_test_cases__"];

/**
 * Reads a context module, runs its lifecycle hooks, resolves the services of its `Moss` from the container and
 * returns a `MossRuntime`. One compiler compiles once.
 */
export class MossCompiler {
  readonly #container: Container;
  readonly #options: MossCompilerOptions;
  readonly #locals: Record<string, unknown> = {};
  readonly #injections: Record<string, unknown> = {};
  /** Tokens the host bound through this compiler before compile. */
  readonly #hostTokens = new Set<Token>();
  /** Tokens the module's `__moss_compile__` bound (it may rebind its own). */
  readonly #moduleTokens = new Set<Token>();
  /** Tokens the module's `__moss_test_setup__` bound (they count as host bindings). */
  readonly #testTokens = new Set<Token>();
  #bindingTestFakes = false;
  readonly #warnings: string[] = [];
  readonly #policies: CallPolicy[] = [];
  #context: MossContext | undefined;
  #contextSource: string | undefined;
  #state: "new" | "compiling" | "compiled" = "new";
  #modulePath = "";

  constructor(options: MossCompilerOptions = {}) {
    // A bad key is refused now, not at the first paused run.
    if (options.continuationKey !== undefined) continuationKey(options.continuationKey);
    this.#options = options;
    this.#container = (options.container ?? new Container({ name: "moss" })).child("moss-compiler");
  }

  /** The compiler's own container: a child of the one it was given. */
  container(): Container {
    return this.#container;
  }

  /**
   * Binds a value to a token in the compiler's container. Before compile this is a host binding; from the module's
   * `__moss_compile__` it is a default that a host binding of the same token overrides (see `compileWarnings`).
   */
  bind<T>(token: Token<T>, value: T): this {
    this.#assertOpen("bind");
    if (this.#admit(token, "bind")) Container.prototype.bind.call(this.#container, token, value);
    return this;
  }

  /** Registers a provider in the compiler's container; same precedence as `bind`. */
  register<T>(provider: Provider<T>): this {
    this.#assertOpen("register");
    const contract = (provider as Partial<Provider<T>> | null)?.contract;
    if (contract === undefined || this.#admit(contract, "register")) {
      Container.prototype.register.call(this.#container, provider);
    }
    return this;
  }

  /**
   * Decides every host call of model code: `"allow"`, `"deny"` (the code gets an `ApprovalDenied` error) or `"ask"`
   * (the run pauses for a person; see `runtime.resume`). `call` is `{ service, member, args, line }`. Several
   * policies, and the module's own `__moss_policy__`, combine: the strictest verdict wins. A member declared with
   * `@approval` always asks unless a policy denies it.
   */
  policy(decide: CallPolicy): this {
    this.#assertOpen("policy");
    if (typeof decide !== "function") {
      throw new MossError(
        "invalid-argument",
        'policy() takes a function (call) => "allow" | "deny" | "ask"',
        {},
      );
    }
    this.#policies.push(decide);
    return this;
  }

  /** Warnings of the compile (binding conflicts); also emitted with `process.emitWarning`. */
  compileWarnings(): readonly string[] {
    return [...this.#warnings];
  }

  /**
   * Binding precedence: the host's bindings (on the container it passed, or made through this compiler before
   * compile) win over the module's `__moss_compile__` defaults for the same token, and the conflict is reported.
   * Returns whether the binding should be made.
   */
  #admit(token: Token, action: "bind" | "register"): boolean {
    if (this.#state !== "compiling") {
      this.#hostTokens.add(token);
      return true;
    }
    // A test's fakes stand where the host setup would: over the module's defaults, under the test's own injections.
    if (this.#bindingTestFakes) {
      if (!this.#testTokens.has(token) && this.#container.bound(token)) return false;
      this.#hostTokens.add(token);
      this.#testTokens.add(token);
      return true;
    }
    if (this.#moduleTokens.has(token) || !this.#container.bound(token)) {
      this.#moduleTokens.add(token);
      return true;
    }
    const host = this.#testTokens.has(token)
      ? "__moss_test_setup__"
      : this.#hostTokens.has(token)
        ? "the host (compiler.bind/register before compile)"
        : `the host (the container given to MossCompiler, "${this.#container.parent?.name ?? "root"}")`;
    const message =
      `binding conflict for ${tokenName(token)}: bound by ${host} and by __moss_compile__ in ${this.#modulePath} ` +
      `(${action}); the host's binding wins`;
    this.#warnings.push(message);
    process.emitWarning(message, { code: "MOSS_BINDING_CONFLICT" });
    return false;
  }

  /** Adds names the model's code can use as if the module declared them (host values reach it through the membrane). */
  withLocals(locals: Record<string, unknown>): this {
    this.#assertOpen("withLocals");
    for (const name of Object.keys(locals)) {
      if (isReachableGlobalName(name)) continue;
      throw new MossError(
        "invalid-argument",
        `withLocals(): "${name}" starts with ${MOSS_NAME_PREFIX}, the prefix moss-ts reserves for its own names (a context ` +
          "module's hooks): model code can never use such a name (the type-check refuses it), so no local " +
          "was added; choose a name without that prefix",
        { name },
      );
    }
    Object.assign(this.#locals, locals);
    return this;
  }

  /** Sets fields of `moss`; these win over the initializer and over a joined context. */
  injects(values: Record<string, unknown>): this {
    this.#assertOpen("injects");
    Object.assign(this.#injections, values);
    return this;
  }

  /**
   * Continues a session: its `code` replaces the module's source, its properties restore data fields. `compile()`
   * checks it against the module (see `restoreContext`); `options.source` (its file) is named in errors.
   */
  joinContext(context: MossContext, options: { source?: string } = {}): this {
    this.#assertOpen("joinContext");
    this.#context = context;
    this.#contextSource = options.source;
    return this;
  }

  /** Compiles the module at `modulePath` (relative to the working directory) into a runtime. */
  async compile(modulePath: string): Promise<MossRuntime> {
    if (this.#state !== "new") {
      throw new MossError(
        "already-compiled",
        "this MossCompiler has already compiled a module; create a new compiler",
        {},
      );
    }
    this.#state = "compiling";
    this.#modulePath = modulePath;
    const absolute = path.resolve(modulePath);
    const source = this.#context?.code ?? (await readModuleFile(absolute, modulePath));
    const sourceOverridden = this.#context?.code !== undefined;
    const build = () => buildModule(absolute, modulePath, source, sourceOverridden);
    const module = await (this.#options.moduleCache?.compiled(
      { path: absolute, displayPath: modulePath, source, sourceOverridden },
      build,
    ) ?? build());
    const { analysis } = module;
    // Bounded by the larger of the default and the configured result limit: a field saved under a larger limit
    // still loads, and the runtime then refuses it by name if it is over the limit in force.
    const maxBytes = Math.max(DEFAULT_LIMITS.maxResultBytes, this.#options.limits?.maxResultBytes ?? 0);
    const restored = this.#context
      ? restoreContext(this.#context, analysis, modulePath, { source: this.#contextSource, maxBytes })
      : undefined;
    for (const warning of restored?.warnings ?? []) {
      this.#warnings.push(warning);
      process.emitWarning(warning, { code: "MOSS_CONTEXT_UNDECLARED" });
    }
    for (const warning of unreachableMossMemberWarnings(analysis, modulePath)) {
      this.#warnings.push(warning);
      process.emitWarning(warning, { code: "MOSS_UNREACHABLE_MEMBER" });
    }
    if (this.#options.testSetup === true) {
      this.#bindingTestFakes = true;
      try {
        await this.#withModuleBindings(() => runHook(module, "__moss_test_setup__", this));
      } finally {
        this.#bindingTestFakes = false;
      }
    }
    await this.#withModuleBindings(() => runHook(module, "__moss_compile__", this));
    this.#state = "compiled";

    const runtime = new MossRuntime({
      module,
      container: this.#container,
      locals: { ...this.#locals },
      context: this.#context,
      typeCheck: this.#options.typeCheck,
      limits: this.#options.limits,
      sandbox: this.#options.sandbox,
      compileWarnings: this.#warnings,
      policies: [
        ...this.#policies,
        ...(module.hooks.__moss_policy__ ? [module.hooks.__moss_policy__ as CallPolicy] : []),
      ],
      ...(this.#options.continuationKey === undefined
        ? {}
        : { continuationKey: this.#options.continuationKey }),
      ...(this.#options.continuationTtlMs === undefined
        ? {}
        : { continuationTtlMs: this.#options.continuationTtlMs }),
      ...(this.#options.durableRuns === undefined ? {} : { durableRuns: this.#options.durableRuns }),
      ...(this.#options.tracePayloads === undefined ? {} : { tracePayloads: this.#options.tracePayloads }),
    });
    try {
      const services = await this.#resolveServices(module);
      const data = this.#initialData(module, restored?.data ?? {});
      await runtime.prompter().prepare();
      await runtime.initialize(services, data);
      await runHook(module, "__moss_compiled__", runtime.hostMoss());
      runtime.adoptHostData(hostDataLeftOut(runtime.hostMoss(), module, modulePath));
      return runtime;
    } catch (error) {
      await runtime.close().catch(() => {});
      throw error;
    }
  }

  /**
   * Runs the module's `__moss_compile__`: bindings it makes directly on `compiler.container()` follow the same
   * precedence as `compiler.bind`/`register` (the container's own methods are routed through them meanwhile).
   */
  async #withModuleBindings(hook: () => Promise<void>): Promise<void> {
    const container = this.#container as Container & { bind: unknown; register: unknown };
    container.bind = (token: Token, value: unknown) => {
      this.bind(token, value);
      return container;
    };
    container.register = (provider: Provider) => {
      this.register(provider);
      return container;
    };
    try {
      await hook();
    } finally {
      delete (container as { bind?: unknown }).bind;
      delete (container as { register?: unknown }).register;
    }
  }

  async #resolveServices(module: CompiledModule): Promise<Map<string, unknown>> {
    const services = new Map<string, unknown>();
    for (const field of module.analysis.mossClass?.fields ?? []) {
      if (field.kind !== "service") continue;
      if (Object.hasOwn(this.#injections, field.name)) {
        services.set(field.name, this.#injections[field.name]);
        continue;
      }
      const token = fieldToken(field, module.locals);
      const value = this.#container.bound(token) ? await this.#container.getAsync(token) : undefined;
      if (value === undefined && !field.optional) throw missingBinding(module, field, token);
      services.set(field.name, value);
    }
    return services;
  }

  #initialData(module: CompiledModule, restored: Record<string, unknown>): Record<string, unknown> {
    const fields = module.analysis.mossClass?.fields ?? [];
    const instance = new module.mossClass() as Record<string, unknown>;
    const data: Record<string, unknown> = {};
    for (const field of fields)
      if (field.kind === "data" && field.name in instance) data[field.name] = instance[field.name];
    const known = new Set(fields.map((field) => field.name));
    Object.assign(data, restored);
    for (const [name, value] of Object.entries(this.#injections)) {
      const field = fields.find((candidate) => candidate.name === name);
      if (!field) {
        throw new MossError(
          "invalid-argument",
          `injects(): "${name}" is not a field of Moss in ${module.displayPath} (fields: ${[...known].join(", ") || "none"})`,
          { field: name },
        );
      }
      if (field.kind === "data") data[name] = value;
    }
    return data;
  }

  #assertOpen(action: string): void {
    if (this.#state === "compiled") {
      throw new MossError(
        "already-compiled",
        `${action}() after compile(): configure the compiler before compiling`,
        {},
      );
    }
  }
}

/**
 * Type-checks a context module file as `compile()` does, without loading it: throws MossError `module-type-error`
 * (or the module's read, syntax and import errors). For commands that read a module statically first (`moss test`).
 */
export async function checkModuleFile(modulePath: string): Promise<void> {
  const absolute = path.resolve(modulePath);
  readCheckedModule(absolute, await readModuleFile(absolute, modulePath), modulePath);
}

/** Reads, type-checks and loads a context module: the part of a compile that does not depend on the session. */
async function buildModule(
  absolute: string,
  displayPath: string,
  source: string,
  sourceOverridden: boolean,
): Promise<CompiledModule> {
  const { project, analysis } = readCheckedModule(absolute, source, displayPath);
  const valueNames = [...new Set(analysis.names.filter((name) => name.value).map((name) => name.name))];
  const loaded = await loadModule(absolute, source, valueNames, { sourceOverridden });
  return {
    path: absolute,
    displayPath,
    analysis,
    project,
    namespace: loaded.namespace,
    locals: loaded.locals,
    hooks: collectHooks(analysis, loaded.namespace, displayPath),
    mossClass: resolveMossClass(analysis, loaded.locals, displayPath),
  };
}

async function readModuleFile(absolute: string, given: string): Promise<string> {
  try {
    return await readFile(absolute, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new MossError(
      "module-not-found",
      code === "ENOENT"
        ? `${given}: no such context module (looked for ${absolute})`
        : `${given}: cannot read: ${String(error)}`,
      { file: absolute },
      { cause: error },
    );
  }
}

function collectHooks(
  analysis: ModuleAnalysis,
  namespace: Record<string, unknown>,
  displayPath: string,
): CompiledModule["hooks"] {
  const hooks: CompiledModule["hooks"] = {};
  for (const name of HOOK_NAMES) {
    const value = namespace[name];
    if (value === undefined || NON_FUNCTION_HOOKS.includes(name)) continue;
    if (typeof value !== "function") {
      const location = analysis.hooks.get(name) ?? { line: 1, column: 1 };
      throw new MossError(
        "hook-shape",
        locatedMessage(
          displayPath,
          analysis.source,
          location.line,
          location.column,
          `${name} must be a function, got ${typeof value}`,
        ),
        { file: displayPath, hook: name, ...location },
      );
    }
    hooks[name] = value as (...args: unknown[]) => unknown;
  }
  return hooks;
}

function resolveMossClass(
  analysis: ModuleAnalysis,
  locals: Record<string, unknown>,
  displayPath: string,
): new () => object {
  if (!analysis.mossClass) return MossBase;
  const value = locals.Moss;
  if (typeof value !== "function") {
    throw new MossError(
      "module-load",
      `${displayPath}:${analysis.mossClass.line}:1 - class Moss did not load as a class`,
      {
        file: displayPath,
      },
    );
  }
  return value as new () => object;
}

async function runHook(module: CompiledModule, name: HookName, argument: unknown): Promise<void> {
  const hook = module.hooks[name];
  if (!hook) return;
  try {
    await hook(argument);
  } catch (error) {
    if (MossError.is(error)) throw error;
    const location = module.analysis.hooks.get(name) ?? { line: 1, column: 1 };
    const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    throw new MossError(
      "hook-failed",
      locatedMessage(
        module.displayPath,
        module.analysis.source,
        location.line,
        location.column,
        `${name} threw ${message}`,
      ),
      { file: module.displayPath, hook: name, ...location },
      { cause: error },
    );
  }
}

function fieldToken(field: MossField, locals: Record<string, unknown>): Token {
  if (field.token?.kind === "class") {
    const value = locals[field.token.name];
    if (typeof value === "function") return value as Token;
  }
  return field.token?.name ?? field.name;
}

/**
 * How the host binds a service class that ships its own binding (its static `mossBindingHint`, e.g. moss-ts/files'
 * `Files`): said first when none is bound.
 */
function bindingHint(token: Token): string | undefined {
  if (typeof token !== "function") return undefined;
  const hint = (token as { mossBindingHint?: unknown }).mossBindingHint;
  return typeof hint === "string" && hint.trim() !== "" ? hint.trim() : undefined;
}

function missingBinding(module: CompiledModule, field: MossField, token: Token): MossError {
  const typeOnly =
    field.token?.kind === "class" && typeof token === "string"
      ? ` (class ${field.token.name} has no run-time value here — it is imported with \`import type\` — so its token is the string "${token}"; import it as a value to use the class as the token: model code still cannot construct a service class)`
      : "";
  const hint = bindingHint(token);
  const message =
    `Moss.${field.name} needs a service for token ${tokenName(token)} but none is bound${typeOnly}: ` +
    (hint === undefined ? "" : `${hint}; or `) +
    `bind it (compiler.bind(${tokenName(token)}, value)), register a provider, or declare the field optional (${field.name}?: ${field.typeText})`;
  return new MossError(
    "binding-missing",
    locatedMessage(module.displayPath, module.analysis.source, field.line, field.column, message),
    {
      file: module.displayPath,
      field: field.name,
      token: tokenName(token),
      line: field.line,
      column: field.column,
    },
  );
}

/** One warning per visible method or accessor of the `Moss` class: model code cannot reach it (`isReachableMossMember`). */
function unreachableMossMemberWarnings(analysis: ModuleAnalysis, displayPath: string): string[] {
  const warned = new Set<string>();
  const warnings: string[] = [];
  for (const member of analysis.mossClass?.unreachable ?? []) {
    if (warned.has(member.name)) continue;
    warned.add(member.name);
    warnings.push(
      `${displayPath}:${member.line}:${member.column} - ${member.name} is a${member.kind === "method" ? " method" : "n accessor"} of Moss: ` +
        "model code cannot reach it (the sandbox's moss holds only the data fields and services), so the prompt leaves it out " +
        "and the type-check refuses it; move it into a bound service, or into a // <moss-hide> region",
    );
  }
  return warnings;
}

/**
 * The data fields the host set (initializers, `injects`, a joined context, `__moss_compiled__`) against the rule a
 * context is read by (`dataFieldMisfits`): a field left `undefined` where its type has no room for it (an
 * uninitialised `when!: Date`) is not stored, and returned to be left out; any other misfit is MossError
 * `context-mismatch` naming the field, so the engine never writes a context it would refuse to read.
 */
function hostDataLeftOut(
  moss: Record<string, unknown>,
  module: CompiledModule,
  modulePath: string,
): string[] {
  const fields = (module.analysis.mossClass?.fields ?? [])
    .filter((field) => field.kind === "data" && field.name in moss)
    .map((field) => field.name);
  const misfits = dataFieldMisfits(module.analysis.declaredTypes, fields, (field) => moss[field]);
  const wrong = misfits.filter((misfit) => moss[misfit.field] !== undefined);
  if (wrong.length > 0)
    throw mismatchError(wrong, module.analysis, modulePath, undefined, "the data the host set at compile");
  return misfits.map((misfit) => misfit.field);
}
