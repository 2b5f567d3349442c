// The module: what a context module IS, read from its source with ts-morph, before anything loads or runs it. Its
// hidden regions, the program a module is read and checked in (options, the moss-ts surface), the analysis (visible
// names, `Moss` fields as data or services, hooks, declared types), the module's own type check, the declared-type
// rule a context's data fields are read and written by, and the shape of a compiled module. The checker, the
// prompter and the runtime read modules through this room; the compiler, above the runtime, loads and runs them.
// Every export is named here.
export { type CompiledModule, hiddenNames, visibleValueNames } from "./compiled-module.ts";
export { type DataFieldMisfit, dataFieldMisfits, declaredTypeProblem } from "./fits-declared-type.ts";
export {
  blankHiddenSource,
  findHiddenRegions,
  type HiddenRegion,
  isLineHidden,
  visibleSource,
} from "./hidden-regions.ts";
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
export {
  createModuleProject,
  hasNodeTypes,
  importsNodeBuiltin,
  MODULE_COMPILER_OPTIONS,
  MODULE_SURFACE_PATH,
  moduleProject,
  moduleProjectFiles,
  nodeTypeOptions,
} from "./module-project.ts";
export { type ModuleTypeError, moduleTypeErrors, readCheckedModule } from "./module-type-check.ts";
