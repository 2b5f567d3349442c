// The runtime: one session of a compiled module, executing checked snippets in the sandbox. Every export is named
// here; the membrane's host half (host-membrane.ts, run-log.ts, declared-members.ts) is internal to this folder.
export { answerShapeProblem, checkAnswers, missingAnswers, requestAnswerProblem } from "./answers.ts";
export {
  type ContinuationPayload,
  continuationCode,
  continuationKey,
  DEFAULT_CONTINUATION_TTL_MS,
  MAX_CONTINUATION_RESULTS,
} from "./continuation.ts";
export { type FencedCode, stripFences } from "./fenced-code.ts";
export { imageFromFile, imageProblem, ShownImages, toImageContent } from "./image-content.ts";
export { MossRuntime } from "./moss-runtime.ts";
export {
  type PreparedSnippet,
  prepareSnippet,
  SNIPPET_FILE,
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
