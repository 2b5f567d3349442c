import type OpenAI from "openai";
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionContentPartImage,
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
  type PartialResponse,
  type PriceTable,
  type ToolCall,
} from "../model/index.ts";
import { DEFAULT_MODEL } from "../stop-reasons.ts";
import type { ImageContent } from "../types.ts";

// The model used when neither the options nor `MOSS_MODEL` name one: written with the agent's other defaults.
export { DEFAULT_MODEL } from "../stop-reasons.ts";

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
  readonly #clientOptions: ConstructorParameters<typeof OpenAI>[0];
  /**
   * The `openai` package and its client, loaded by the first request: importing moss-ts (which every context module
   * does, on each `moss check` and `moss run`) must not load the package's hundreds of files.
   */
  #client: Promise<OpenAI> | undefined;
  /** The package's error classes, once it is loaded. */
  #sdk: typeof OpenAI | undefined;
  readonly #prices: PriceTable;
  readonly #streamUsage: boolean;

  constructor(options: OpenAILanguageModelOptions = {}) {
    const env = options.env ?? process.env;
    this.baseUrl = options.baseUrl ?? nonEmpty(env.OPENAI_BASE_URL) ?? DEFAULT_BASE_URL;
    this.model = options.model ?? nonEmpty(env.MOSS_MODEL) ?? DEFAULT_MODEL;
    this.#prices = options.prices ?? DEFAULT_PRICE_TABLE;
    this.#streamUsage = options.streamUsage ?? true;
    this.#clientOptions = {
      baseURL: this.baseUrl,
      apiKey: options.apiKey ?? nonEmpty(env.OPENAI_API_KEY) ?? "no-key",
      maxRetries: options.maxRetries ?? 2,
      timeout: options.timeoutMs ?? 120_000,
    };
  }

  async probe(timeoutMs = 5_000): Promise<string | undefined> {
    const client = await this.#openai();
    const OpenAI = this.#sdk!;
    try {
      const page = await client.models.list({ maxRetries: 0, timeout: timeoutMs });
      const names = page.data.map((entry) => entry.id);
      if (names.length > 0 && !names.includes(this.model)) {
        return `the model server at ${this.baseUrl} does not list the model "${this.model}" (it lists ${names.slice(0, 5).join(", ")}${names.length > 5 ? ", …" : ""})`;
      }
      return undefined;
    } catch (error) {
      if (error instanceof OpenAI.AuthenticationError || error instanceof OpenAI.PermissionDeniedError) {
        return `the model server at ${this.baseUrl} refused the API key (${error.status}); check OPENAI_API_KEY`;
      }
      if (error instanceof OpenAI.APIError && typeof error.status === "number") {
        // A server without a model list still answers; one that fails answers no run either.
        return error.status >= 500
          ? `the model server at ${this.baseUrl} answered ${error.status} to GET /models`
          : undefined;
      }
      throw this.#mapError(error);
    }
  }

  operatorSecrets(): string[] {
    const apiKey = String(this.#clientOptions?.apiKey ?? "");
    return [...(apiKey === "no-key" ? [] : [apiKey]), this.baseUrl];
  }

  #openai(): Promise<OpenAI> {
    this.#client ??= import("openai").then(({ default: sdk }) => {
      this.#sdk = sdk;
      return new sdk(this.#clientOptions);
    });
    return this.#client;
  }

  async generate(request: LanguageModelRequest): Promise<LanguageModelResponse> {
    try {
      const { data, response } = await (await this.#openai()).chat.completions
        .create({ ...this.#body(request), stream: false }, { signal: request.signal })
        .withResponse();
      const completion = data as unknown;
      const choice = this.#validChoice(completion, response.headers.get("content-type"));
      const usage = (completion as { usage?: { prompt_tokens?: number; completion_tokens?: number } }).usage;
      const toolCalls: ToolCall[] = [];
      for (const call of choice.message.tool_calls ?? []) {
        if (call.type === "function") {
          toolCalls.push({ id: call.id, name: call.function.name, arguments: call.function.arguments });
        }
      }
      return this.#response({
        content: choice.message.content ?? "",
        toolCalls,
        inputTokens: usage?.prompt_tokens ?? 0,
        outputTokens: usage?.completion_tokens ?? 0,
        model: (completion as { model?: string }).model || this.model,
        finishReason: choice.finish_reason,
      });
    } catch (error) {
      throw this.#mapError(error);
    }
  }

  /** The server's `n_ctx` from llama-server's `GET /props` (other servers: undefined). Never throws. */
  async contextWindow(): Promise<number | undefined> {
    if (this.baseUrl === DEFAULT_BASE_URL) return undefined;
    try {
      const url = new URL("../props", `${this.baseUrl.replace(/\/+$/, "")}/`);
      // No idle keep-alive socket is left behind: the chat request that follows, possibly after seconds of
      // compiling or tokenizing, would reuse a socket the server has closed meanwhile (ECONNRESET).
      const response = await fetch(url, {
        headers: { connection: "close" },
        signal: AbortSignal.timeout(2_000),
      });
      if (!response.ok) return undefined;
      const props = (await response.json()) as {
        n_ctx?: unknown;
        default_generation_settings?: { n_ctx?: unknown };
      };
      const size = props.default_generation_settings?.n_ctx ?? props.n_ctx;
      return typeof size === "number" && Number.isInteger(size) && size > 0 ? size : undefined;
    } catch {
      return undefined;
    }
  }

  /** The first choice of a 200 response, or a model-request error saying what the body lacked. */
  #validChoice(completion: unknown, contentType: string | null): ChatCompletion.Choice {
    if (completion === null || typeof completion !== "object") {
      const text = typeof completion === "string" ? completion : String(completion);
      throw this.#invalid(
        `its body is not JSON (content-type ${contentType ?? "none"}): ${JSON.stringify(text.slice(0, 200))}`,
      );
    }
    const choices = (completion as { choices?: unknown }).choices;
    if (!Array.isArray(choices) || choices.length === 0) {
      const error = (completion as { error?: { message?: unknown } }).error;
      throw this.#invalid(
        error !== undefined
          ? `it has no choices but an error: ${typeof error?.message === "string" ? error.message : JSON.stringify(error)}`
          : `it has no choices (${JSON.stringify(completion).slice(0, 200)})`,
      );
    }
    const choice = choices[0] as ChatCompletion.Choice;
    if (
      choice === null ||
      typeof choice !== "object" ||
      choice.message === null ||
      typeof choice.message !== "object"
    ) {
      throw this.#invalid("its first choice has no message");
    }
    if (typeof choice.finish_reason !== "string" || (choice.finish_reason as string) === "") {
      throw this.#invalid("its first choice has no finish_reason (the answer may be incomplete)");
    }
    return choice;
  }

  #invalid(what: string, extra: Record<string, unknown> = {}): MossError {
    return new MossError(
      "model-request",
      `The model server at ${this.baseUrl} answered 200 but not with a chat completion: ${what}.`,
      { baseUrl: this.baseUrl, model: this.model, reason: "invalid-response", ...extra },
    );
  }

  async stream(
    request: LanguageModelRequest,
    onTextDelta: (delta: string) => void,
  ): Promise<LanguageModelResponse> {
    let chunkCount = 0;
    let content = "";
    const calls = new Map<number, ToolCall>();
    const toolCallList = () =>
      [...calls.entries()]
        .sort(([a], [b]) => a - b)
        .map(([index, call]) => ({ ...call, id: call.id || `call_${index}` }));
    try {
      const { data: chunks, response } = await (await this.#openai()).chat.completions
        .create(
          {
            ...this.#body(request),
            stream: true,
            ...(this.#streamUsage ? { stream_options: { include_usage: true } } : {}),
          },
          { signal: request.signal },
        )
        .withResponse();
      let model = "";
      let finishReason: string | null | undefined;
      let inputTokens = 0;
      let outputTokens = 0;
      let choiceCount = 0;
      try {
        for await (const chunk of chunks as AsyncIterable<ChatCompletionChunk>) {
          chunkCount += 1;
          if (chunk.model) model = chunk.model;
          if (chunk.usage) {
            inputTokens = chunk.usage.prompt_tokens ?? inputTokens;
            outputTokens = chunk.usage.completion_tokens ?? outputTokens;
          }
          const choice = chunk.choices?.[0];
          if (choice === undefined) continue;
          choiceCount += 1;
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
      } catch (error) {
        if (request.signal?.aborted || chunkCount === 0) throw error;
        const partial = { content, toolCalls: toolCallList(), chunks: chunkCount };
        if (error instanceof SyntaxError) {
          throw this.#invalid(`chunk ${chunkCount + 1} of its stream is not valid JSON (${error.message})`, {
            partial,
          });
        }
        throw this.#streamCut(partial, error);
      }
      if (chunkCount === 0) {
        throw this.#invalid(
          `the stream held no chunks (content-type ${response.headers.get("content-type") ?? "none"})`,
        );
      }
      if (choiceCount === 0) throw this.#invalid(`none of its ${chunkCount} stream chunks had a choice`);
      if (!finishReason) throw this.#streamCut({ content, toolCalls: toolCallList(), chunks: chunkCount });
      return this.#response({
        content,
        toolCalls: toolCallList(),
        inputTokens,
        outputTokens,
        model: model || this.model,
        finishReason,
      });
    } catch (error) {
      throw this.#mapError(error);
    }
  }

  /** The stream ended (or broke) before a finish reason: the partial answer travels on `details.partial`. */
  #streamCut(partial: PartialResponse, cause?: unknown): MossError {
    const why = cause instanceof Error ? ` (${describeCause(cause) || cause.message})` : "";
    return new MossError(
      "model-connection",
      `The model server at ${this.baseUrl} ${cause === undefined ? "ended" : "closed"} the stream after ${partial.chunks} chunk${partial.chunks === 1 ? "" : "s"}${cause === undefined ? " without a finish reason" : why}, before the answer was finished; the partial answer (${partial.content.length} characters${partial.toolCalls.length > 0 ? `, ${partial.toolCalls.length} tool call(s)` : ""}) was not used.`,
      { baseUrl: this.baseUrl, model: this.model, reason: "stream-cut", partial },
      cause === undefined ? undefined : { cause },
    );
  }

  #body(request: LanguageModelRequest): ChatCompletionCreateParamsBase {
    const tools: ChatCompletionTool[] | undefined = request.tools?.map((tool) => ({
      type: "function",
      function: { name: tool.name, description: tool.description, parameters: tool.parameters },
    }));
    return {
      model: this.model,
      messages: toOpenAIMessages(request.messages),
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
    // Before the package loaded, nothing it throws can have happened.
    const OpenAI = this.#sdk;
    if (OpenAI === undefined) return this.#requestFailed(error);
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
    if (error instanceof OpenAI.APIError && isContextOverflow(error)) {
      const body = (error.error ?? {}) as { n_ctx?: unknown; n_prompt_tokens?: unknown };
      return new MossError(
        "model-request",
        `The model server at ${this.baseUrl} rejected the request because the prompt does not fit the model's context (${error.status}): ${error.message}`,
        {
          ...details,
          status: error.status,
          reason: "context-overflow",
          ...(typeof body.n_ctx === "number" ? { contextTokens: body.n_ctx } : {}),
          ...(typeof body.n_prompt_tokens === "number" ? { promptTokens: body.n_prompt_tokens } : {}),
        },
        { cause: error },
      );
    }
    if (error instanceof SyntaxError) {
      return this.#invalid(`its body is not valid JSON (${error.message})`);
    }
    if (error instanceof OpenAI.APIError) {
      return new MossError(
        "model-request",
        `The model server at ${this.baseUrl} rejected the request: ${error.message}`,
        { ...details, status: error.status },
        { cause: error },
      );
    }
    return this.#requestFailed(error);
  }

  #requestFailed(error: unknown): MossError {
    const message = error instanceof Error ? error.message : String(error);
    return new MossError(
      "model-request",
      `The request to ${this.baseUrl} failed: ${message}`,
      { baseUrl: this.baseUrl, model: this.model },
      { cause: error },
    );
  }
}

const CONTEXT_OVERFLOW =
  /exceeds? the available context|context (?:size|length|window)|maximum context length|context_length_exceeded|exceed_context_size|too many tokens|prompt is too long/i;

/** A 400/413 whose text or type says the prompt is longer than the model's context (llama.cpp, OpenAI, vLLM wordings). */
function isContextOverflow(error: InstanceType<typeof OpenAI.APIError>): boolean {
  if (error.status !== 400 && error.status !== 413) return false;
  const body = (error.error ?? {}) as { type?: unknown; code?: unknown };
  return CONTEXT_OVERFLOW.test(`${error.message} ${String(body.type ?? "")} ${String(body.code ?? "")}`);
}

/** What precedes the images a run showed, in the user message that carries them after the tool messages. */
export const SHOWN_IMAGES_TEXT = "The images your code showed with moss.show:";

/**
 * The chat messages in OpenAI's wire form: a user message's images become `image_url` parts with data URLs (or
 * their URL); tool messages cannot hold images, so the images of a run of tool messages follow it in one user message.
 */
export function toOpenAIMessages(messages: LanguageModelRequest["messages"]): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  let shown: ImageContent[] = [];
  const flush = () => {
    if (shown.length === 0) return;
    out.push({ role: "user", content: [{ type: "text", text: SHOWN_IMAGES_TEXT }, ...shown.map(imagePart)] });
    shown = [];
  };
  for (const message of messages) {
    if (message.role !== "tool") flush();
    out.push(toOpenAIMessage(message));
    if (message.role === "tool" && message.images !== undefined) shown.push(...message.images);
  }
  flush();
  return out;
}

function imagePart(image: ImageContent): ChatCompletionContentPartImage {
  const url = image.url ?? `data:${image.mediaType};base64,${image.data ?? ""}`;
  return {
    type: "image_url",
    image_url: { url, ...(image.detail === undefined ? {} : { detail: image.detail }) },
  };
}

function toOpenAIMessage(message: LanguageModelRequest["messages"][number]): ChatCompletionMessageParam {
  switch (message.role) {
    case "system":
      return { role: message.role, content: message.content };
    case "user":
      if (message.images !== undefined && message.images.length > 0) {
        return {
          role: "user",
          content: [
            ...(message.content === "" ? [] : [{ type: "text" as const, text: message.content }]),
            ...message.images.map(imagePart),
          ],
        };
      }
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
