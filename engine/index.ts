// The public API of moss-ts: every export is named here.
export { codeFrame, MossError, type MossErrorCode } from "./errors.ts";
export { type Injection, Moss } from "./moss.ts";
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
