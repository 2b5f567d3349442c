// The runtime: one session of a compiled module, executing checked snippets in the sandbox. Every export is named
// here. Inside: the session (moss-runtime.ts, session-setup.ts, session-data.ts, session-definitions.ts), the snippet
// (checked-snippet.ts, prepare-snippet.ts), the run (run-plan.ts, run-verdict.ts, run-signal.ts),
// durable runs (continuation.ts, run-continuation.ts), and the membrane's host half (host-membrane.ts,
// declared-members.ts, run-log.ts with log-entry.ts, call-decision.ts, denotations.ts, handle-wire.ts,
// host-outcome.ts), which is internal to this folder.
export {
  type ContinuationPayload,
  continuationCode,
  continuationKey,
  DEFAULT_CONTINUATION_TTL_MS,
  MAX_CONTINUATION_RESULTS,
} from "./continuation.ts";
export { MossRuntime } from "./moss-runtime.ts";
export {
  type PreparedSnippet,
  prepareSnippet,
  type SnippetSyntaxError,
} from "./prepare-snippet.ts";
export { currentRunSignal, withRunSignal } from "./run-signal.ts";
export type { MossRuntimeOptions, ResumeOptions } from "./runtime-options.ts";
export {
  closeSharedSandboxes,
  configureSharedSandboxes,
  type SharedSandboxOptions,
  sharedSandboxDriver,
} from "./shared-sandbox.ts";
