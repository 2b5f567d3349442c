import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One scripted answer of the fake server: a completion, an HTTP error, or a raw body. */
export type FakeReply =
  | {
      content?: string;
      toolCalls?: Array<{ id?: string; name: string; arguments: string }>;
      finishReason?: "stop" | "length" | "tool_calls";
      promptTokens?: number;
      completionTokens?: number;
      /** Keeps generating (the content, repeated) until `max_tokens`, or the context when none was sent. */
      ramble?: boolean;
      /** Streaming: the server destroys the connection after this many SSE chunks. */
      cutAfterChunks?: number;
      /** Leaves `choices` out (an error-shaped or empty 200). */
      noChoices?: boolean;
      /** Leaves `finish_reason` null in every chunk or in the completion. */
      noFinishReason?: boolean;
      /** Streaming: after this many chunks the server sends a line that is not JSON, then goes on. */
      garbageAfterChunks?: number;
      /** The server answers only once this settles (a run stays running meanwhile). */
      hold?: Promise<unknown>;
    }
  | {
      status: number;
      error: { message: string; type?: string; code?: string | number; [key: string]: unknown };
    }
  | { raw: string; contentType?: string };

/** What the fake server saw of one request. */
export interface FakeRequest {
  path: string;
  authorization: string | undefined;
  body: Record<string, any>;
}

/** A local OpenAI-compatible chat-completions server that speaks JSON and SSE, scripted per test. */
export interface FakeOpenAIServer {
  baseUrl: string;
  requests: FakeRequest[];
  close(): Promise<void>;
}

export interface FakeServerOptions {
  /** Requests without `Authorization: Bearer <apiKey>` get a 401 like OpenAI's. */
  apiKey?: string;
  /** Models the server knows; other names get a 404 `model_not_found` like OpenAI's. */
  models?: string[];
  /** Characters per streamed content or argument delta (one "token" of this server). */
  chunkChars?: number;
  /**
   * Like llama-server's `n_ctx`: `GET /props` reports it, a prompt longer than it (counted as characters / 4)
   * gets llama-server's 400 `exceeds the available context size`, and output is unlimited unless `max_tokens`
   * is sent (a rambling reply then runs until the context is full).
   */
  contextTokens?: number;
}

/** The 400 body llama-server sends when the prompt does not fit its context. */
export function contextOverflowError(promptTokens: number, contextTokens: number) {
  return {
    status: 400,
    error: {
      code: 400,
      message: "the request exceeds the available context size, try increasing it",
      type: "exceed_context_size_error",
      n_prompt_tokens: promptTokens,
      n_ctx: contextTokens,
    },
  } as const;
}

export async function startFakeOpenAIServer(
  replies: FakeReply[],
  options: FakeServerOptions = {},
): Promise<FakeOpenAIServer> {
  const requests: FakeRequest[] = [];
  const chunkChars = options.chunkChars ?? 7;
  let next = 0;
  const server = createServer(async (request, response) => {
    const body = JSON.parse((await readBody(request)) || "{}");
    if (request.url === "/props" && request.method === "GET") {
      // llama-server's server properties; `requests` lists chat requests only.
      if (options.contextTokens === undefined) return sendError(response, 404, { message: "File Not Found" });
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ default_generation_settings: { n_ctx: options.contextTokens } }));
      return;
    }
    if (request.url === "/v1/models" && request.method === "GET") {
      // The model list (moss serve asks for it at start); `requests` lists chat requests only.
      response.writeHead(200, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          object: "list",
          data: (options.models ?? []).map((id) => ({ id, object: "model", created: 0, owned_by: "fake" })),
        }),
      );
      return;
    }
    requests.push({ path: request.url ?? "", authorization: request.headers.authorization, body });
    if (request.url !== "/v1/chat/completions" || request.method !== "POST") {
      return sendError(response, 404, {
        message: `Unknown path ${request.url}`,
        type: "invalid_request_error",
      });
    }
    if (options.apiKey !== undefined && request.headers.authorization !== `Bearer ${options.apiKey}`) {
      return sendError(response, 401, {
        message: "Incorrect API key provided.",
        type: "invalid_request_error",
        code: "invalid_api_key",
      });
    }
    if (options.models !== undefined && !options.models.includes(body.model)) {
      return sendError(response, 404, {
        message: `The model \`${body.model}\` does not exist or you do not have access to it.`,
        type: "invalid_request_error",
        code: "model_not_found",
      });
    }
    // Like llama-server: a prompt longer than the context is refused before anything is generated.
    const promptTokens = Math.ceil(JSON.stringify(body.messages ?? []).length / 4);
    if (options.contextTokens !== undefined && promptTokens > options.contextTokens) {
      const overflow = contextOverflowError(promptTokens, options.contextTokens);
      return sendError(response, overflow.status, overflow.error);
    }
    const reply = replies[next++];
    if (reply === undefined) {
      return sendError(response, 500, {
        message: `fake server: no scripted reply #${next}`,
        type: "server_error",
      });
    }
    if ("status" in reply) return sendError(response, reply.status, reply.error);
    if ("raw" in reply) {
      response.writeHead(200, { "content-type": reply.contentType ?? "text/html" });
      response.end(reply.raw);
      return;
    }
    if (reply.hold !== undefined) await reply.hold;
    let content = reply.content ?? "";
    let finishReason: string | null | undefined = reply.finishReason;
    if (reply.ramble === true) {
      const room = (options.contextTokens ?? 100_000) - promptTokens;
      const limit = typeof body.max_tokens === "number" ? Math.min(body.max_tokens, room) : room;
      const text = content || "and so on ";
      content = text.repeat(Math.ceil((limit * chunkChars) / text.length) + 1).slice(0, limit * chunkChars);
      finishReason = "length";
    }
    const toolCalls = (reply.toolCalls ?? []).map((call, index) => ({
      id: call.id ?? `call_${next}_${index}`,
      type: "function" as const,
      function: { name: call.name, arguments: call.arguments },
    }));
    finishReason ??= toolCalls.length > 0 ? "tool_calls" : "stop";
    if (reply.noFinishReason === true) finishReason = null;
    const usage = {
      prompt_tokens: reply.promptTokens ?? 100,
      completion_tokens: reply.completionTokens ?? 20,
      total_tokens: (reply.promptTokens ?? 100) + (reply.completionTokens ?? 20),
    };
    const base = { id: `chatcmpl-${next}`, created: 1_700_000_000, model: body.model };
    if (body.stream !== true) {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          ...base,
          object: "chat.completion",
          ...(reply.noChoices === true
            ? {}
            : {
                choices: [
                  {
                    index: 0,
                    message: {
                      role: "assistant",
                      content: content === "" && toolCalls.length > 0 ? null : content,
                      ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
                    },
                    finish_reason: finishReason,
                  },
                ],
              }),
          usage,
        }),
      );
      return;
    }
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const deltas: Array<[Record<string, unknown>, string | null]> = [
      [{ role: "assistant", content: "" }, null],
    ];
    for (const piece of pieces(content, chunkChars)) deltas.push([{ content: piece }, null]);
    toolCalls.forEach((call, index) => {
      deltas.push([
        {
          tool_calls: [
            { index, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } },
          ],
        },
        null,
      ]);
      for (const piece of pieces(call.function.arguments, chunkChars)) {
        deltas.push([{ tool_calls: [{ index, function: { arguments: piece } }] }, null]);
      }
    });
    deltas.push([{}, finishReason]);
    response.flushHeaders();
    for (const [sent, [delta, finish]] of deltas.entries()) {
      if (reply.cutAfterChunks !== undefined && sent >= reply.cutAfterChunks) {
        // Like a server that crashed or a proxy that timed out: the chunks so far arrived, then the socket closes.
        await new Promise<void>((resolve) => setTimeout(resolve, 20));
        response.socket?.destroy();
        return;
      }
      if (sent === reply.garbageAfterChunks) response.write("data: {oops\n\n");
      const choices = reply.noChoices === true ? [] : [{ index: 0, delta, finish_reason: finish }];
      response.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices })}\n\n`);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    if (body.stream_options?.include_usage) {
      response.write(
        `data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [], usage })}\n\n`,
      );
    }
    response.end("data: [DONE]\n\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

/** A base URL on which nothing listens (a port that was just freed). */
export async function refusedBaseUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/v1`;
}

function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let index = 0; index < text.length; index += size) out.push(text.slice(index, index + size));
  return out;
}

function sendError(response: ServerResponse, status: number, error: Record<string, unknown>): void {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify({ error: { param: null, code: null, ...error } }));
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    request.setEncoding("utf8");
    request.on("data", (part: string) => (text += part));
    request.on("end", () => resolve(text));
    request.on("error", reject);
  });
}
