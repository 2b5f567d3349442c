// The public API of moss-ts: every export is named here.
export { Container, type Provider, provide, type Token } from "../container/index.ts";
export { MossCompiler, type MossCompilerOptions } from "./compiler/moss-compiler.ts";
export { codeFrame, MossError, type MossErrorCode } from "./errors.ts";
export { type Injection, Moss } from "./moss.ts";
export { type AttributeEntry, MossPrompter } from "./prompter/moss-prompter.ts";
export { MossRuntime, type MossRuntimeOptions } from "./runtime/moss-runtime.ts";
export {
  DEFAULT_LIMITS,
  type Diagnostic,
  type ExecuteRequest,
  type Execution,
  type ExecutionError,
  type ExecutionErrorKind,
  type ExecutionLimits,
  type MossContext,
  type TypeCheckMode,
} from "./types.ts";
