// The compiler: loads a context module, analyses it and makes runtimes. Every export is named here; module-hooks.ts
// is a loader entry (registered with node:module), not API.
export { type CompiledModule, hiddenNames, visibleValueNames } from "./compiled-module.ts";
export { esmPackageProblem } from "./esm-package.ts";
export { declaredTypeProblem } from "./fits-declared-type.ts";
export {
  blankHiddenSource,
  findHiddenRegions,
  type HiddenRegion,
  isLineHidden,
  visibleSource,
} from "./hidden-regions.ts";
export { ensureModuleLoaders, type LoadedModule, loadModule } from "./load-module.ts";
export {
  analyzeModule,
  HOOK_NAMES,
  type HookName,
  isPublicMember,
  type ModuleAnalysis,
  type MossField,
  publicMembers,
  type TokenSpec,
  type TopLevelName,
} from "./module-analysis.ts";
export { ModuleCache, type ModuleCacheOptions } from "./module-cache.ts";
export {
  createModuleProject,
  hasNodeTypes,
  importsNodeBuiltin,
  MODULE_COMPILER_OPTIONS,
  MODULE_SURFACE_PATH,
  moduleProject,
  moduleProjectFiles,
} from "./module-project.ts";
export { type ModuleTypeError, moduleTypeErrors, readCheckedModule } from "./module-type-check.ts";
export { checkModuleFile, MossCompiler, type MossCompilerOptions } from "./moss-compiler.ts";
export { type RestoreContextOptions, type RestoredContext, restoreContext } from "./restore-context.ts";
export { type MossVitePlugin, mossVitePlugin } from "./vite-plugin.ts";
