// Type-checking the model's code against a context module.
export { MOSS_DIAGNOSTIC_CODES } from "../diagnostic-codes.ts";
export { CHECK_COMPILER_OPTIONS, ModuleChecker, type ModuleCheckerOptions } from "./module-checker.ts";
export {
  type CheckerPoolOptions,
  configureCheckerPool,
  DEFAULT_TYPE_CHECK_MEMORY_BYTES,
  DEFAULT_TYPE_CHECK_TIMEOUT_MS,
  liveCheckerWorkers,
  WorkerModuleChecker,
  type WorkerModuleCheckerOptions,
  warmCheckerPool,
} from "./worker-checker.ts";
