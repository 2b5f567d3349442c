import { afterEach, describe, expect, it } from "vitest";
import { MOSS_TOOL } from "../../engine/agent/agent-prompt.ts";
import { OpenAILanguageModel } from "../../engine/agent/openai-language-model.ts";
import { MossError } from "../../engine/errors.ts";
import { computeCost } from "../../engine/model/language-model.ts";
import {
  contextOverflowError,
  type FakeOpenAIServer,
  refusedBaseUrl,
  startFakeOpenAIServer,
} from "./fake-openai-server.ts";

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const prices = { "gpt-test": { inputPerMillionTokens: 2, outputPerMillionTokens: 8 } };
const messages = [
  { role: "system" as const, content: "be brief" },
  { role: "user" as const, content: "hi" },
];

function model(baseUrl: string, overrides: Record<string, unknown> = {}) {
  return new OpenAILanguageModel({
    baseUrl,
    apiKey: "sk-test",
    model: "gpt-test",
    maxRetries: 0,
    prices,
    env: {},
    ...overrides,
  });
}

describe("OpenAILanguageModel against a local OpenAI-compatible server", () => {
  it("generates text, tokens and cost without streaming", async () => {
    server = await startFakeOpenAIServer([
      { content: "hello there", promptTokens: 1000, completionTokens: 500 },
    ]);
    const response = await model(server.baseUrl).generate({ messages, maxTokens: 50, temperature: 0.2 });
    expect(response).toEqual({
      content: "hello there",
      toolCalls: [],
      inputTokens: 1000,
      outputTokens: 500,
      cost: (1000 * 2 + 500 * 8) / 1_000_000,
      model: "gpt-test",
      finishReason: "stop",
    });
    const body = server.requests[0]!.body;
    expect(body.model).toBe("gpt-test");
    expect(body.max_tokens).toBe(50);
    expect(body.temperature).toBe(0.2);
    expect(body.messages).toEqual([
      { role: "system", content: "be brief" },
      { role: "user", content: "hi" },
    ]);
    expect(server.requests[0]!.authorization).toBe("Bearer sk-test");
  });

  it("streams text deltas and assembles tool calls from argument deltas", async () => {
    const code = 'async function main(moss: Moss) {\n  console.log("a \\"quoted\\" word");\n}';
    server = await startFakeOpenAIServer(
      [
        {
          content: "Let me look.",
          toolCalls: [
            { id: "call_a", name: "moss", arguments: JSON.stringify({ code }) },
            { id: "call_b", name: "moss", arguments: JSON.stringify({ code: "async function main() {}" }) },
          ],
          promptTokens: 10,
          completionTokens: 30,
        },
      ],
      { chunkChars: 3 },
    );
    const deltas: string[] = [];
    const response = await model(server.baseUrl).stream({ messages, tools: [MOSS_TOOL] }, (delta) =>
      deltas.push(delta),
    );
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("Let me look.");
    expect(response.content).toBe("Let me look.");
    expect(response.toolCalls).toEqual([
      { id: "call_a", name: "moss", arguments: JSON.stringify({ code }) },
      { id: "call_b", name: "moss", arguments: JSON.stringify({ code: "async function main() {}" }) },
    ]);
    expect(response.finishReason).toBe("tool-calls");
    expect(response.inputTokens).toBe(10);
    expect(response.outputTokens).toBe(30);
    const body = server.requests[0]!.body;
    expect(body.stream).toBe(true);
    expect(body.tools).toEqual([
      {
        type: "function",
        function: { name: "moss", description: MOSS_TOOL.description, parameters: MOSS_TOOL.parameters },
      },
    ]);
  });

  it("sends assistant tool calls and tool results in the wire format", async () => {
    server = await startFakeOpenAIServer([{ content: "done" }]);
    await model(server.baseUrl).generate({
      messages: [
        ...messages,
        {
          role: "assistant",
          content: "",
          toolCalls: [{ id: "c1", name: "moss", arguments: '{"code":"x"}' }],
        },
        { role: "tool", content: "ok", toolCallId: "c1" },
      ],
    });
    expect(server.requests[0]!.body.messages.slice(2)).toEqual([
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "moss", arguments: '{"code":"x"}' } }],
      },
      { role: "tool", content: "ok", tool_call_id: "c1" },
    ]);
  });

  it("maps a 401 to model-auth", async () => {
    server = await startFakeOpenAIServer([{ content: "never" }], { apiKey: "sk-right" });
    const error = await model(server.baseUrl, { apiKey: "sk-wrong" })
      .generate({ messages })
      .catch((caught: unknown) => caught);
    expect(MossError.is(error, "model-auth")).toBe(true);
    expect((error as MossError).message).toContain(server.baseUrl);
    expect((error as MossError).message).toContain("OPENAI_API_KEY");
  });

  it("maps an unknown model (404) to model-not-found, naming the model, also when streaming", async () => {
    server = await startFakeOpenAIServer([], { models: ["gpt-test"] });
    const unknown = model(server.baseUrl, { model: "gpt-nope" });
    for (const call of [() => unknown.generate({ messages }), () => unknown.stream({ messages }, () => {})]) {
      const error = await call().catch((caught: unknown) => caught);
      expect(MossError.is(error, "model-not-found")).toBe(true);
      expect((error as MossError).message).toContain('"gpt-nope"');
    }
  });

  it("maps a refused connection to model-connection, naming the URL", async () => {
    const baseUrl = await refusedBaseUrl();
    const error = await model(baseUrl)
      .stream({ messages }, () => {})
      .catch((caught: unknown) => caught);
    expect(MossError.is(error, "model-connection")).toBe(true);
    expect((error as MossError).message).toContain(baseUrl);
    expect((error as MossError).message).toContain("ECONNREFUSED");
  });

  it("maps other server errors to model-request with the status", async () => {
    server = await startFakeOpenAIServer([{ status: 400, error: { message: "messages must not be empty" } }]);
    const error = await model(server.baseUrl)
      .generate({ messages })
      .catch((caught: unknown) => caught);
    expect(MossError.is(error, "model-request")).toBe(true);
    expect((error as MossError).details.status).toBe(400);
    expect((error as MossError).message).toContain("messages must not be empty");
  });

  it("reads OPENAI_BASE_URL, OPENAI_API_KEY and MOSS_MODEL from the environment", async () => {
    server = await startFakeOpenAIServer([{ content: "ok" }], { apiKey: "sk-env", models: ["env-model"] });
    const fromEnv = new OpenAILanguageModel({
      maxRetries: 0,
      env: { OPENAI_BASE_URL: server.baseUrl, OPENAI_API_KEY: "sk-env", MOSS_MODEL: "env-model" },
    });
    expect(fromEnv.model).toBe("env-model");
    expect((await fromEnv.generate({ messages })).content).toBe("ok");
  });
});

describe("OpenAILanguageModel against servers that misbehave", () => {
  it("reads llama-server's n_ctx from /props, and undefined from servers without it", async () => {
    server = await startFakeOpenAIServer([], { contextTokens: 2048 });
    expect(await model(server.baseUrl).contextWindow()).toBe(2048);
    await server.close();
    server = await startFakeOpenAIServer([]);
    expect(await model(server.baseUrl).contextWindow()).toBeUndefined();
    expect(await model(await refusedBaseUrl()).contextWindow()).toBeUndefined();
  });

  it("a cut stream carries the partial answer and the exact chunk count", async () => {
    server = await startFakeOpenAIServer([
      {
        content: "abcdefg",
        toolCalls: [{ id: "c1", name: "moss", arguments: '{"code": "async function main() {}"}' }],
        cutAfterChunks: 4,
      },
    ]);
    const deltas: string[] = [];
    const error = await model(server.baseUrl)
      .stream({ messages }, (delta) => deltas.push(delta))
      .catch((caught: unknown) => caught);
    expect(MossError.is(error, "model-connection")).toBe(true);
    const { details, message } = error as MossError;
    expect(message).toContain(`The model server at ${server.baseUrl} closed the stream after 4 chunks`);
    // Chunks: role, "abcdefg", the tool call's name, its first 7 characters of arguments.
    expect(details).toMatchObject({
      reason: "stream-cut",
      partial: {
        content: "abcdefg",
        chunks: 4,
        toolCalls: [{ id: "c1", name: "moss", arguments: '{"code"' }],
      },
    });
    expect(deltas.join("")).toBe("abcdefg");
  });

  it("a stream that ends without a finish reason is cut too", async () => {
    server = await startFakeOpenAIServer([{ content: "abc", noFinishReason: true }]);
    const error = await model(server.baseUrl)
      .stream({ messages }, () => {})
      .catch((caught: unknown) => caught);
    expect((error as MossError).details.reason).toBe("stream-cut");
    // role, "abc", the final chunk (finish_reason null), the usage chunk.
    expect((error as MossError).message).toContain("ended the stream after 4 chunks without a finish reason");
  });

  it("maps llama-server's 400 context overflow to model-request with reason, n_ctx and prompt tokens", async () => {
    server = await startFakeOpenAIServer([contextOverflowError(5000, 4096)]);
    const error = await model(server.baseUrl)
      .generate({ messages })
      .catch((caught: unknown) => caught);
    expect(MossError.is(error, "model-request")).toBe(true);
    expect((error as MossError).details).toMatchObject({
      reason: "context-overflow",
      contextTokens: 4096,
      promptTokens: 5000,
      status: 400,
    });
    expect((error as MossError).message).toContain("exceeds the available context size");
  });

  it("sends max_tokens only when asked, so the caller decides", async () => {
    server = await startFakeOpenAIServer([{ content: "a" }, { content: "b" }]);
    await model(server.baseUrl).generate({ messages });
    await model(server.baseUrl).generate({ messages, maxTokens: 64 });
    expect(server.requests.map((request) => request.body.max_tokens)).toEqual([undefined, 64]);
  });
});

describe("computeCost", () => {
  it("prices by exact name, then by the longest prefix, and 0 for unknown models", () => {
    const table = {
      "gpt-4o": { inputPerMillionTokens: 2.5, outputPerMillionTokens: 10 },
      "gpt-4o-mini": { inputPerMillionTokens: 0.15, outputPerMillionTokens: 0.6 },
    };
    expect(computeCost(table, "gpt-4o", 1_000_000, 1_000_000)).toBeCloseTo(12.5);
    expect(computeCost(table, "gpt-4o-mini-2024-07-18", 1_000_000, 0)).toBeCloseTo(0.15);
    expect(computeCost(table, "llama3", 1_000_000, 1_000_000)).toBe(0);
  });
});
