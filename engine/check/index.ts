// Type-checking the model's code against a context module.
export { MOSS_DIAGNOSTIC_CODES } from "./diagnostic-codes.ts";
export { CHECK_COMPILER_OPTIONS, ModuleChecker, type ModuleCheckerOptions } from "./module-checker.ts";
export { type RenderDiagnosticsOptions, renderDiagnostics } from "./render-diagnostics.ts";
