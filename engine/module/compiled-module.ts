import type { Project } from "ts-morph";
import { isReachableGlobalName } from "../membrane/index.ts";
import type { HookName, ModuleAnalysis } from "./module-analysis.ts";

/** A context module read, analysed and loaded on the host: what the prompter and the runtime share. */
export interface CompiledModule {
  /** Absolute path of the module file. */
  path: string;
  /** The path as the user gave it (shown in prompts and errors). */
  displayPath: string;
  analysis: ModuleAnalysis;
  project: Project;
  /** The module's exports. */
  namespace: Record<string, unknown>;
  /** The module's top-level values by local name (imports and declarations, exported or not). */
  locals: Record<string, unknown>;
  hooks: Partial<Record<HookName, (...args: any[]) => unknown>>;
  /** The module's `Moss` class, or the moss-ts base when the module declares none. */
  mossClass: new () => object;
}

/** Names of the module's visible top-level values, the ones model code may reach (hooks and `Moss` excluded). */
export function visibleValueNames(module: CompiledModule): string[] {
  return module.analysis.names
    .filter((name) => name.value && !name.hidden && isReachableGlobalName(name.name) && name.name !== "Moss")
    .map((name) => name.name);
}

/** Names declared only in hidden regions (and not also declared visibly). */
export function hiddenNames(module: Pick<CompiledModule, "analysis">): string[] {
  const visible = new Set(module.analysis.names.filter((name) => !name.hidden).map((name) => name.name));
  return [
    ...new Set(
      module.analysis.names.filter((name) => name.hidden && !visible.has(name.name)).map((n) => n.name),
    ),
  ];
}
