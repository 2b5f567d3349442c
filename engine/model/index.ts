// The model room: what the agent asks a language model (the LanguageModel contract, prices and their cost) and the
// conversation tree with its stores; the OpenAI-compatible client stays in agent/, the one file that imports openai.
// It loads no TypeScript compiler: a server builds its model and reads conversations without loading the engine that
// reads modules (see server/moss-server.ts).

export {
  Conversation,
  type ConversationJson,
  type ConversationMessage,
  type ConversationRole,
} from "./conversation.ts";
export {
  type ConversationStore,
  FileConversationStore,
  MemoryConversationStore,
} from "./conversation-store.ts";
export {
  type ChatMessage,
  computeCost,
  DEFAULT_PRICE_TABLE,
  type FinishReason,
  type LanguageModel,
  type LanguageModelRequest,
  type LanguageModelResponse,
  type ModelPrice,
  type PartialResponse,
  type PriceTable,
  type ToolCall,
  type ToolSpec,
} from "./language-model.ts";
