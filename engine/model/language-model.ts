import type { ImageContent } from "../types.ts";

/** A tool call the model made: `arguments` is the raw JSON text the model wrote (it may be malformed). */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** One message of a chat request. */
export type ChatMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string; images?: ImageContent[] }
  | { role: "assistant"; content: string; toolCalls?: ToolCall[] }
  /** `images`: what the code showed with `moss.show`; an adapter whose API has no images in tool messages sends them after. */
  | { role: "tool"; content: string; toolCallId: string; images?: ImageContent[] };

/** A function the model may call; `parameters` is a JSON Schema object. */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** What a language model is asked. */
export interface LanguageModelRequest {
  messages: ChatMessage[];
  maxTokens?: number;
  temperature?: number;
  tools?: ToolSpec[];
  signal?: AbortSignal;
}

/** Why the model stopped producing output, normalised across providers. */
export type FinishReason = "stop" | "length" | "tool-calls" | "content-filter" | "other";

/** What a language model answered; `content` is always a string (empty when the model only called tools). */
export interface LanguageModelResponse {
  content: string;
  toolCalls: ToolCall[];
  inputTokens: number;
  outputTokens: number;
  /** In US dollars, from the model's price table; 0 for a model the table does not know. */
  cost: number;
  model: string;
  finishReason: FinishReason;
}

/** The contract every model adapter implements (after the ConCopilot LLM contract). */
export interface LanguageModel {
  /** The model name requests are sent to. */
  readonly model: string;
  /** One complete answer. */
  generate(request: LanguageModelRequest): Promise<LanguageModelResponse>;
  /** The same answer, with each piece of text passed to `onTextDelta` as it arrives. */
  stream(request: LanguageModelRequest, onTextDelta: (delta: string) => void): Promise<LanguageModelResponse>;
  /** The context size (tokens) the server reports for this model, when it says so cheaply; else undefined. */
  contextWindow?(): Promise<number | undefined>;
  /**
   * Asks the model server whether it answers (e.g. its model list): resolves undefined when it does, a sentence
   * saying what is wrong when it answers with a refusal (the key, the model name); rejects when it cannot be reached.
   */
  probe?(): Promise<string | undefined>;
  /** The credentials it sends (its API key) and where (its base URL): `moss serve` shows a tenant neither. */
  operatorSecrets?(): string[];
}

/** What a model server sent of an answer before the stream was cut (on a MossError's `details.partial`). */
export interface PartialResponse {
  content: string;
  toolCalls: ToolCall[];
  chunks: number;
}

/** Price of one model in US dollars per million tokens. */
export interface ModelPrice {
  inputPerMillionTokens: number;
  outputPerMillionTokens: number;
}

/** Prices keyed by model name. */
export type PriceTable = Readonly<Record<string, ModelPrice>>;

/** A few well-known OpenAI prices (USD per million tokens); pass your own table for other models. */
export const DEFAULT_PRICE_TABLE: PriceTable = Object.freeze({
  "gpt-4o": { inputPerMillionTokens: 2.5, outputPerMillionTokens: 10 },
  "gpt-4o-mini": { inputPerMillionTokens: 0.15, outputPerMillionTokens: 0.6 },
  "gpt-4.1": { inputPerMillionTokens: 2, outputPerMillionTokens: 8 },
  "gpt-4.1-mini": { inputPerMillionTokens: 0.4, outputPerMillionTokens: 1.6 },
  "gpt-4.1-nano": { inputPerMillionTokens: 0.1, outputPerMillionTokens: 0.4 },
});

/**
 * Cost in US dollars of one call: the exact model name is looked up first, then the longest table key the
 * name starts with (so `gpt-4o-2024-08-06` uses `gpt-4o`); a model the table does not know costs 0.
 */
export function computeCost(
  prices: PriceTable,
  model: string,
  inputTokens: number,
  outputTokens: number,
): number {
  let price = prices[model];
  if (price === undefined) {
    const prefix = Object.keys(prices)
      .filter((key) => model.startsWith(key))
      .sort((a, b) => b.length - a.length)[0];
    price = prefix === undefined ? undefined : prices[prefix];
  }
  if (price === undefined) return 0;
  return (
    (inputTokens * price.inputPerMillionTokens + outputTokens * price.outputPerMillionTokens) / 1_000_000
  );
}
