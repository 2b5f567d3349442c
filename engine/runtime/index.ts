// The runtime: one session of a compiled module, executing checked snippets in the sandbox. Every export is named
// here; the membrane's host half (host-membrane.ts, run-log.ts, declared-members.ts) is internal to this folder.
export {
  type ContinuationPayload,
  continuationCode,
  continuationKey,
  DEFAULT_CONTINUATION_TTL_MS,
  MAX_CONTINUATION_RESULTS,
} from "./continuation.ts";
export { MossRuntime, type MossRuntimeOptions, type ResumeOptions } from "./moss-runtime.ts";
export {
  type PreparedSnippet,
  prepareSnippet,
  type SnippetSyntaxError,
} from "./prepare-snippet.ts";
export { currentRunSignal, withRunSignal } from "./run-signal.ts";
export {
  closeSharedSandboxes,
  configureSharedSandboxes,
  type SharedSandboxOptions,
  sharedSandboxDriver,
} from "./shared-sandbox.ts";
