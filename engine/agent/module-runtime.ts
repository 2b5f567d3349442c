import type { Container, Token } from "../../container/index.ts";
import { loadHostSetup, MossCompiler, type MossCompilerOptions } from "../compiler/index.ts";
import type { MossRuntime } from "../runtime/index.ts";
import type { MossContext } from "../types.ts";

/** How to build runtimes of one context module. */
export interface ModuleRuntimeOptions {
  modulePath: string;
  /** Each compile works in a child of this container. */
  container?: Container;
  /** Passed to every MossCompiler (type-check mode, limits, sandbox). */
  compiler?: Omit<MossCompilerOptions, "container">;
  /**
   * Run the module's `<name>.host.ts` `setup(compiler)` before each compile when it exists (true, the default), no
   * host setup (false), or the setup file at this path (a config's `modules.<name>.host`).
   */
  hostSetup?: boolean | string;
  /** Token/value bindings made after the host setup, before compile (test fakes win over real services). */
  inject?: Iterable<readonly [Token, unknown]>;
  /** Runs after the host setup and the injections, before compile. */
  configure?: (compiler: MossCompiler) => void | Promise<void>;
}

/** Compiles the module into a fresh MossRuntime, continuing from `context` when given. */
export async function compileModuleRuntime(
  options: ModuleRuntimeOptions,
  context?: MossContext,
): Promise<MossRuntime> {
  const compiler = new MossCompiler({
    ...options.compiler,
    ...(options.container === undefined ? {} : { container: options.container }),
  });
  const hostSetup = options.hostSetup ?? true;
  if (hostSetup !== false)
    await loadHostSetup(options.modulePath, compiler, hostSetup === true ? undefined : hostSetup);
  for (const [token, value] of options.inject ?? []) compiler.bind(token, value);
  await options.configure?.(compiler);
  if (context !== undefined) compiler.joinContext(context);
  return compiler.compile(options.modulePath);
}

/** Builds runtimes of `modulePath` for an agent: each compile with its container, compiler options and host setup. */
export function moduleRuntimeFactory(options: {
  modulePath?: string | undefined;
  container?: Container | undefined;
  compiler?: ModuleRuntimeOptions["compiler"];
  hostSetup?: boolean | string | undefined;
}): (context: MossContext | undefined) => Promise<MossRuntime> {
  const { modulePath } = options;
  if (modulePath === undefined) throw new TypeError("moduleRuntimeFactory needs a modulePath");
  const moduleOptions: ModuleRuntimeOptions = {
    modulePath,
    ...(options.container === undefined ? {} : { container: options.container }),
    ...(options.compiler === undefined ? {} : { compiler: options.compiler }),
    ...(options.hostSetup === undefined ? {} : { hostSetup: options.hostSetup }),
  };
  return (context) => compileModuleRuntime(moduleOptions, context);
}
