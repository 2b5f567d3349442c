// What a context module's code sees of "moss-ts" when moss-ts reads and checks it: the base class, the service
// lifecycle and the shapes its hooks receive, without the engine's own declarations (ts-morph, openai, isolated-vm),
// which would make every analysis and type-check program parse megabytes of .d.ts the model's code never uses.
// The interfaces below are what a hook may use of the real classes; test/compiler/module-surface.test.ts keeps the
// real classes assignable to them.
import type { Token } from "../container/token.ts";
import type {
  Answers,
  CallPolicy,
  Diagnostic,
  ExecuteRequest,
  Execution,
  ExecutionLimits,
  MossContext,
} from "./types.ts";

export type { Token } from "../container/token.ts";
export { type Injection, type InjectionRuntime, Moss } from "./moss.ts";
export type * from "./types.ts";

/** A recipe for a service: the contract it fulfils and a factory that builds it from the container. */
export interface Provider<T = unknown> {
  contract: Token<T>;
  singleton?: boolean;
  factory(container: Container): T | Promise<T>;
}

/** The service container a module's `__moss_compile__` binds into (`compiler.container()`). */
export interface Container {
  readonly name: string;
  bind<T>(token: Token<T>, value: T): this;
  register<T>(provider: Provider<T>): this;
  get<T>(token: Token<T>): T | undefined;
  getAsync<T>(token: Token<T>): Promise<T | undefined>;
  forceFetch<T>(token: Token<T>): T;
  forceFetchAsync<T>(token: Token<T>): Promise<T>;
  bound(token: Token): boolean;
  child(name?: string): Container;
}

/** The compiler a module's `__moss_compile__` receives. */
export interface MossCompiler {
  container(): Container;
  bind<T>(token: Token<T>, value: T): this;
  register<T>(provider: Provider<T>): this;
  policy(decide: CallPolicy): this;
  compileWarnings(): readonly string[];
  withLocals(locals: Record<string, unknown>): this;
  injects(values: Record<string, unknown>): this;
  joinContext(context: MossContext): this;
}

/** The prompter a module's `__moss_module_prompt__` receives. */
export interface MossPrompter {
  readonly modulePath: string;
  sourceCode(options?: { excludeHidden?: boolean }): Promise<string>;
  reflectModuleAttrs(): Promise<Array<[string, string]>>;
  dumpAttrsPrompt(): Promise<string>;
  dumpModulePrompt(): Promise<string>;
}

/** The runtime a module's `__moss_exec__` receives. */
export interface MossRuntime {
  readonly modulePath: string;
  readonly closed: boolean;
  compileWarnings(): readonly string[];
  container(): Container;
  prompter(): MossPrompter;
  typecheck(code: string): Promise<Diagnostic[]>;
  execute(request: ExecuteRequest): Promise<Execution>;
  resume(
    continuation: string,
    answers: Answers,
    options?: { limits?: Partial<ExecutionLimits> },
  ): Promise<Execution>;
  dumpStdOutput(): string;
  dumpContext(): MossContext;
  mossInjections(): Record<string, unknown>;
  close(): Promise<void>;
}
