import OpenAI from "openai";
import type {
  ChatCompletionChunk,
  ChatCompletionCreateParamsBase,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from "openai/resources/chat/completions";
import { MossError } from "../errors.ts";
import {
  computeCost,
  DEFAULT_PRICE_TABLE,
  type FinishReason,
  type LanguageModel,
  type LanguageModelRequest,
  type LanguageModelResponse,
  type PriceTable,
  type ToolCall,
} from "./language-model.ts";

/** The model used when neither the options nor `MOSS_MODEL` name one. */
export const DEFAULT_MODEL = "gpt-4o-mini";

/** The server used when neither the options nor `OPENAI_BASE_URL` name one. */
export const DEFAULT_BASE_URL = "https://api.openai.com/v1";

/** Options of {@link OpenAILanguageModel}; each falls back to an environment variable, then a default. */
export interface OpenAILanguageModelOptions {
  /** Default: `OPENAI_BASE_URL`, then the OpenAI API. */
  baseUrl?: string;
  /** Default: `OPENAI_API_KEY`; servers that need no key get a placeholder. */
  apiKey?: string;
  /** Default: `MOSS_MODEL`, then {@link DEFAULT_MODEL}. */
  model?: string;
  /** Retries of the `openai` client itself (connection errors, 408/409/429/5xx). Default 2. */
  maxRetries?: number;
  /** Per-request timeout of the `openai` client. Default 120 000. */
  timeoutMs?: number;
  /** Prices for cost accounting; default {@link DEFAULT_PRICE_TABLE}. */
  prices?: PriceTable;
  /** Ask streaming servers for token usage (`stream_options.include_usage`). Default true. */
  streamUsage?: boolean;
  /** Where the environment variables are read from. Default `process.env`. */
  env?: Record<string, string | undefined>;
}

/** A {@link LanguageModel} over the `openai` package, against any OpenAI-compatible chat-completions server. */
export class OpenAILanguageModel implements LanguageModel {
  readonly model: string;
  readonly baseUrl: string;
  readonly #client: OpenAI;
  readonly #prices: PriceTable;
  readonly #streamUsage: boolean;

  constructor(options: OpenAILanguageModelOptions = {}) {
    const env = options.env ?? process.env;
    this.baseUrl = options.baseUrl ?? nonEmpty(env.OPENAI_BASE_URL) ?? DEFAULT_BASE_URL;
    this.model = options.model ?? nonEmpty(env.MOSS_MODEL) ?? DEFAULT_MODEL;
    this.#prices = options.prices ?? DEFAULT_PRICE_TABLE;
    this.#streamUsage = options.streamUsage ?? true;
    this.#client = new OpenAI({
      baseURL: this.baseUrl,
      apiKey: options.apiKey ?? nonEmpty(env.OPENAI_API_KEY) ?? "no-key",
      maxRetries: options.maxRetries ?? 2,
      timeout: options.timeoutMs ?? 120_000,
    });
  }

  async generate(request: LanguageModelRequest): Promise<LanguageModelResponse> {
    try {
      const completion = await this.#client.chat.completions.create(
        { ...this.#body(request), stream: false },
        { signal: request.signal },
      );
      const choice = completion.choices[0];
      const toolCalls: ToolCall[] = [];
      for (const call of choice?.message.tool_calls ?? []) {
        if (call.type === "function") {
          toolCalls.push({ id: call.id, name: call.function.name, arguments: call.function.arguments });
        }
      }
      return this.#response({
        content: choice?.message.content ?? "",
        toolCalls,
        inputTokens: completion.usage?.prompt_tokens ?? 0,
        outputTokens: completion.usage?.completion_tokens ?? 0,
        model: completion.model || this.model,
        finishReason: choice?.finish_reason,
      });
    } catch (error) {
      throw this.#mapError(error);
    }
  }

  async stream(
    request: LanguageModelRequest,
    onTextDelta: (delta: string) => void,
  ): Promise<LanguageModelResponse> {
    try {
      const chunks = await this.#client.chat.completions.create(
        {
          ...this.#body(request),
          stream: true,
          ...(this.#streamUsage ? { stream_options: { include_usage: true } } : {}),
        },
        { signal: request.signal },
      );
      let content = "";
      let model = "";
      let finishReason: string | null | undefined;
      let inputTokens = 0;
      let outputTokens = 0;
      const calls = new Map<number, ToolCall>();
      for await (const chunk of chunks as AsyncIterable<ChatCompletionChunk>) {
        if (chunk.model) model = chunk.model;
        if (chunk.usage) {
          inputTokens = chunk.usage.prompt_tokens ?? inputTokens;
          outputTokens = chunk.usage.completion_tokens ?? outputTokens;
        }
        const choice = chunk.choices?.[0];
        if (choice === undefined) continue;
        if (choice.finish_reason) finishReason = choice.finish_reason;
        const text = choice.delta?.content;
        if (text) {
          content += text;
          onTextDelta(text);
        }
        for (const part of choice.delta?.tool_calls ?? []) {
          const call = calls.get(part.index) ?? { id: "", name: "", arguments: "" };
          if (part.id) call.id = part.id;
          if (part.function?.name) call.name += part.function.name;
          if (part.function?.arguments) call.arguments += part.function.arguments;
          calls.set(part.index, call);
        }
      }
      const toolCalls = [...calls.entries()]
        .sort(([a], [b]) => a - b)
        .map(([index, call]) => ({ ...call, id: call.id || `call_${index}` }));
      return this.#response({
        content,
        toolCalls,
        inputTokens,
        outputTokens,
        model: model || this.model,
        finishReason,
      });
    } catch (error) {
      throw this.#mapError(error);
    }
  }

  #body(request: LanguageModelRequest): ChatCompletionCreateParamsBase {
    const tools: ChatCompletionTool[] | undefined = request.tools?.map((tool) => ({
      type: "function",
      function: { name: tool.name, description: tool.description, parameters: tool.parameters },
    }));
    return {
      model: this.model,
      messages: request.messages.map(toOpenAIMessage),
      ...(request.maxTokens === undefined ? {} : { max_tokens: request.maxTokens }),
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
      ...(tools === undefined || tools.length === 0 ? {} : { tools }),
    };
  }

  #response(parts: {
    content: string;
    toolCalls: ToolCall[];
    inputTokens: number;
    outputTokens: number;
    model: string;
    finishReason: string | null | undefined;
  }): LanguageModelResponse {
    return {
      content: parts.content,
      toolCalls: parts.toolCalls,
      inputTokens: parts.inputTokens,
      outputTokens: parts.outputTokens,
      cost: computeCost(this.#prices, parts.model, parts.inputTokens, parts.outputTokens),
      model: parts.model,
      finishReason: toFinishReason(parts.finishReason, parts.toolCalls.length > 0),
    };
  }

  #mapError(error: unknown): unknown {
    if (MossError.is(error)) return error;
    const details = { baseUrl: this.baseUrl, model: this.model };
    if (error instanceof OpenAI.APIUserAbortError) {
      return new MossError("model-request", `The request to ${this.baseUrl} was aborted.`, details, {
        cause: error,
      });
    }
    if (error instanceof OpenAI.APIConnectionTimeoutError) {
      return new MossError(
        "model-connection",
        `The model server at ${this.baseUrl} did not answer in time (${error.message}).`,
        details,
        { cause: error },
      );
    }
    if (error instanceof OpenAI.APIConnectionError) {
      const cause = describeCause(error);
      return new MossError(
        "model-connection",
        `Cannot connect to the model server at ${this.baseUrl}${cause ? `: ${cause}` : ""}. Is it running, and is OPENAI_BASE_URL right?`,
        details,
        { cause: error },
      );
    }
    if (error instanceof OpenAI.AuthenticationError || error instanceof OpenAI.PermissionDeniedError) {
      return new MossError(
        "model-auth",
        `The model server at ${this.baseUrl} refused the API key (${error.status}): ${error.message}. Check OPENAI_API_KEY.`,
        { ...details, status: error.status },
        { cause: error },
      );
    }
    if (error instanceof OpenAI.NotFoundError) {
      return new MossError(
        "model-not-found",
        `The model server at ${this.baseUrl} answered 404 for model "${this.model}": ${error.message}. Check MOSS_MODEL (or --model) and that the base URL ends with the API root (e.g. /v1).`,
        { ...details, status: 404 },
        { cause: error },
      );
    }
    if (error instanceof OpenAI.APIError) {
      return new MossError(
        "model-request",
        `The model server at ${this.baseUrl} rejected the request: ${error.message}`,
        { ...details, status: error.status },
        { cause: error },
      );
    }
    const message = error instanceof Error ? error.message : String(error);
    return new MossError("model-request", `The request to ${this.baseUrl} failed: ${message}`, details, {
      cause: error,
    });
  }
}

function toOpenAIMessage(message: LanguageModelRequest["messages"][number]): ChatCompletionMessageParam {
  switch (message.role) {
    case "system":
    case "user":
      return { role: message.role, content: message.content };
    case "assistant":
      if (message.toolCalls !== undefined && message.toolCalls.length > 0) {
        return {
          role: "assistant",
          content: message.content === "" ? null : message.content,
          tool_calls: message.toolCalls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          })),
        };
      }
      return { role: "assistant", content: message.content };
    case "tool":
      return { role: "tool", content: message.content, tool_call_id: message.toolCallId };
  }
}

function toFinishReason(reason: string | null | undefined, hasToolCalls: boolean): FinishReason {
  switch (reason) {
    case "stop":
      return hasToolCalls ? "tool-calls" : "stop";
    case "length":
      return "length";
    case "tool_calls":
    case "function_call":
      return "tool-calls";
    case "content_filter":
      return "content-filter";
    default:
      return hasToolCalls ? "tool-calls" : "other";
  }
}

function describeCause(error: Error): string {
  const seen = new Set<unknown>();
  let cause: unknown = error.cause;
  const parts: string[] = [];
  while (cause instanceof Error && !seen.has(cause)) {
    seen.add(cause);
    const code = (cause as { code?: unknown }).code;
    parts.push(typeof code === "string" ? code : cause.message);
    cause = cause.cause;
  }
  return parts.at(-1) ?? "";
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value;
}
