// The agent: the OpenAI-compatible client, code extraction and the MossAgent loop (the LanguageModel contract and the
// conversation tree live in model/ and are re-exported here).

export { describeRequest, formatReturns, truncateMiddle } from "../format-value.ts";
export {
  type ChatMessage,
  Conversation,
  type ConversationJson,
  type ConversationMessage,
  type ConversationRole,
  type ConversationStore,
  computeCost,
  DEFAULT_PRICE_TABLE,
  FileConversationStore,
  type FinishReason,
  type LanguageModel,
  type LanguageModelRequest,
  type LanguageModelResponse,
  MemoryConversationStore,
  type ModelPrice,
  type PartialResponse,
  type PriceTable,
  type ToolCall,
  type ToolSpec,
} from "../model/index.ts";
export {
  AGENT_ROLE,
  buildSystemPrompt,
  CODE_RULES,
  cutOffNotice,
  FENCE_MODE_INSTRUCTIONS,
  MODULE_HEADING,
  MOSS_TOOL,
  OBSERVATION_INSTRUCTIONS,
  STOP_INSTRUCTIONS,
  TOOL_MODE_INSTRUCTIONS,
  unclearAnswerNotice,
} from "./agent-prompt.ts";
// The steps of the loop, one per file (for a server that drives runs step by step).
export { type AskModelOptions, askModel } from "./ask-model.ts";
export { chatMessages } from "./chat-messages.ts";
export { type CheckedAgentOptions, checkAgentOptions } from "./check-agent-options.ts";
export {
  type ContextTrim,
  countTokens,
  DEFAULT_CONTEXT_TOKENS,
  describeTrim,
  fitContext,
  promptBudget,
  type WindowEntry,
  wellFormed,
} from "./context-window.ts";
export { eventStream } from "./event-stream.ts";
export {
  type CodeSource,
  type ExtractedCode,
  extractProseCode,
  extractTextToolCalls,
  extractToolCode,
  parseJsonish,
  stripFences,
  stripReasoning,
  type TextToolCall,
  type TextToolCalls,
} from "./extract-code.ts";
export { type FittedContext, fitContextOffThread, startTokenCounter } from "./fit-context-thread.ts";
export { compileModuleRuntime, type ModuleRuntimeOptions } from "./module-runtime.ts";
export {
  type AgentContextStore,
  type AgentEvent,
  type AgentRunOptions,
  type AgentRunResult,
  type AgentRuntime,
  type AgentTask,
  type AgentUsage,
  type CreateRuntime,
  DEFAULT_MAX_TOKENS,
  MossAgent,
  type MossAgentOptions,
  STOP_REASONS,
  type StopReason,
  unclearAnswer,
} from "./moss-agent.ts";
export {
  type MossExpectedError,
  type MossModuleTestReport,
  type MossTestCase,
  type MossTestCaseResult,
  type MossTestCaseSpec,
  type MossTestRunOptions,
  MossTestSuite,
  type MossTestSuiteOptions,
} from "./moss-test-suite.ts";
export {
  DEFAULT_OBSERVATION_LIMITS,
  FAILURE_HINT,
  imagesNote,
  NOT_TYPE_CHECKED,
  NOTHING_OBSERVED,
  noCodeObservation,
  notResumedObservation,
  type ObservationLimits,
  PAUSED_NOTE,
  renderObservation,
} from "./observation.ts";
export {
  DEFAULT_BASE_URL,
  DEFAULT_MODEL,
  OpenAILanguageModel,
  type OpenAILanguageModelOptions,
} from "./openai-language-model.ts";
export { type AppendMessage, type PendingStep, pendingSteps } from "./pending-step.ts";
export { persistSession, type SessionStores } from "./persist-session.ts";
export { type ActionResult, type RunActionOptions, runAction } from "./run-action.ts";
export { type RunWindow, sizeRunWindow } from "./run-window.ts";
export {
  ScriptedLanguageModel,
  type ScriptedRecording,
  type ScriptedResponse,
} from "./scripted-language-model.ts";
export { type StepAction, stepActions } from "./step-actions.ts";
