// The compiler: loads a context module (tsx's loader and moss-ts's module hooks), builds its container, restores its
// context and makes runtimes; it reads the module through engine/module/. Every export is named here;
// module-hooks.ts is a loader entry (registered with node:module), not API.
export { esmPackageProblem } from "./esm-package.ts";
export { hostSetupFile, loadHostSetup } from "./host-setup.ts";
export {
  ensureModuleLoaders,
  type LoadedModule,
  loadedModuleFiles,
  loadModule,
  trackModuleLoads,
} from "./load-module.ts";
export { ModuleCache, type ModuleCacheOptions } from "./module-cache.ts";
export { checkModuleFile, MossCompiler, type MossCompilerOptions } from "./moss-compiler.ts";
export { type RestoreContextOptions, type RestoredContext, restoreContext } from "./restore-context.ts";
export { type MossVitePlugin, mossVitePlugin } from "./vite-plugin.ts";
