// The public API of moss-ts: every export is named here.
export { Container, type Provider, provide, type Token } from "../container/index.ts";
export {
  type AgentEvent,
  type AgentRunOptions,
  type AgentRunResult,
  type AgentTask,
  type ChatMessage,
  Conversation,
  type ConversationMessage,
  DEFAULT_CONTEXT_TOKENS,
  DEFAULT_MAX_TOKENS,
  FileConversationStore,
  type LanguageModel,
  type LanguageModelRequest,
  type LanguageModelResponse,
  MossAgent,
  type MossAgentOptions,
  MossTestSuite,
  OpenAILanguageModel,
  type OpenAILanguageModelOptions,
  ScriptedLanguageModel,
  STOP_REASONS,
  type StopReason,
} from "./agent/index.ts";
export { checkAnswers, missingAnswers } from "./answers.ts";
export {
  type CheckerPoolOptions,
  configureCheckerPool,
  ModuleChecker,
  WorkerModuleChecker,
  warmCheckerPool,
} from "./check/index.ts";
export {
  ModuleCache,
  type ModuleCacheOptions,
  MossCompiler,
  type MossCompilerOptions,
  type MossVitePlugin,
  mossVitePlugin,
} from "./compiler/index.ts";
export {
  type ContextStore,
  createContext,
  decodeProperties,
  encodeProperties,
  FileContextStore,
  joinContexts,
  readContextFile,
  validateContext,
  writeContextFile,
} from "./context/index.ts";
export { codeFrame, MossError, type MossErrorCode } from "./errors.ts";
export { imageFromFile, toImageContent } from "./image-content.ts";
export { type Injection, type InjectionRuntime, Moss } from "./moss.ts";
export { type AttributeEntry, MossPrompter } from "./prompter/index.ts";
export { renderDiagnostics } from "./render-diagnostics.ts";
export {
  closeSharedSandboxes,
  configureSharedSandboxes,
  currentRunSignal,
  MossRuntime,
  type MossRuntimeOptions,
  type SharedSandboxOptions,
} from "./runtime/index.ts";
export {
  type Answer,
  type Answers,
  type ApprovalRequest,
  type CallPolicy,
  type ClarificationRequest,
  DEFAULT_LIMITS,
  type Diagnostic,
  type ExecuteRequest,
  type Execution,
  type ExecutionError,
  type ExecutionErrorKind,
  type ExecutionLimits,
  type HostCallRecord,
  type ImageContent,
  type ImageInput,
  type MossContext,
  type PendingRequest,
  type PendingRun,
  type PolicyCall,
  type PolicyVerdict,
  type TracePayloads,
  type TypeCheckMode,
} from "./types.ts";
