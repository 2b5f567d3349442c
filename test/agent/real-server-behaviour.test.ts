// The agent against what real model servers and weak models send (issue 9), over the real `openai` client and a
// local server on 127.0.0.1 that behaves like llama-server: text tool calls, cut-off answers, broken 200s, cut
// streams, context overflow. The runtime is a scripted stand-in; moss-agent.test.ts runs the real one.
import { afterEach, describe, expect, it } from "vitest";
import { type AgentEvent, DEFAULT_MAX_TOKENS, MossAgent } from "../../engine/agent/moss-agent.ts";
import { OpenAILanguageModel } from "../../engine/agent/openai-language-model.ts";
import { MossError } from "../../engine/errors.ts";
import { MemoryConversationStore } from "../../engine/model/conversation-store.ts";
import {
  contextOverflowError,
  type FakeOpenAIServer,
  type FakeReply,
  startFakeOpenAIServer,
} from "./fake-openai-server.ts";
import { ScriptedRuntime } from "./scripted-runtime.ts";

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const MAIN = 'async function main(moss: Moss) {\n  console.log("hi");\n}';

function openai(baseUrl: string) {
  return new OpenAILanguageModel({ baseUrl, apiKey: "k", model: "local", maxRetries: 0, env: {} });
}

async function runAgainst(
  replies: FakeReply[],
  options: {
    tools?: boolean;
    stream?: boolean;
    contextTokens?: number;
    serverContextTokens?: number;
    maxSteps?: number;
    outcomes?: ConstructorParameters<typeof ScriptedRuntime>[0];
  } = {},
) {
  server = await startFakeOpenAIServer(replies, {
    ...(options.serverContextTokens === undefined ? {} : { contextTokens: options.serverContextTokens }),
  });
  const runtime = new ScriptedRuntime(options.outcomes ?? []);
  const agent = new MossAgent({
    model: openai(server.baseUrl),
    createRuntime: async () => runtime,
    ...(options.tools === undefined ? {} : { tools: options.tools }),
    ...(options.stream === undefined ? {} : { stream: options.stream }),
    ...(options.contextTokens === undefined ? {} : { contextTokens: options.contextTokens }),
    ...(options.maxSteps === undefined ? {} : { maxSteps: options.maxSteps }),
  });
  const events: AgentEvent[] = [];
  const result = await agent.run("say hi", { onEvent: (event) => events.push(event) });
  return { result, events, runtime, agent, requests: server.requests };
}

/** Roles of a request's messages, to check they alternate as the chat API expects. */
function roles(body: Record<string, any>): string {
  return (body.messages as Array<{ role: string }>).map((message) => message.role).join(",");
}

describe("code in text runs in both modes", () => {
  for (const tools of [true, false]) {
    it(`runs a chatml <tool_call> written as text (tools ${tools ? "on" : "off"}) and answers it as a user message`, async () => {
      const call = JSON.stringify({ name: "moss", arguments: { code: MAIN } });
      const { result, runtime, requests, events } = await runAgainst(
        [{ content: `Printing.\n<tool_call>\n${call}\n</tool_call>` }, { content: "Printed hi." }],
        { tools, outcomes: [{ ok: true, stdout: "hi\n" }] },
      );
      expect(result.stopReason).toBe("answer");
      expect(runtime.requests.map((request) => request.code)).toEqual([MAIN]);
      expect(events.find((event) => event.type === "code")).toMatchObject({ source: "tool-text" });
      expect(roles(requests[1]!.body)).toBe("system,user,assistant,user");
      expect(requests[1]!.body.messages.at(-1).content).toContain("<stdout>\nhi\n</stdout>");
    });
  }

  it("runs a fenced typescript block in tool mode", async () => {
    const { result, runtime } = await runAgainst(
      [{ content: `Here:\n\`\`\`typescript\n${MAIN}\n\`\`\`` }, { content: "Done: printed hi." }],
      { outcomes: [{ ok: true }] },
    );
    expect(result.stopReason).toBe("answer");
    expect(runtime.requests.map((request) => request.code)).toEqual([MAIN]);
  });

  it("reads the arguments as a JSON string, a <|python_tag|> call and a bare JSON call", async () => {
    const { runtime, result } = await runAgainst(
      [
        {
          content: `<tool_call>${JSON.stringify({ name: "moss", arguments: JSON.stringify({ code: MAIN }) })}</tool_call>`,
        },
        {
          content: `<|python_tag|>${JSON.stringify({ name: "moss", parameters: { code: MAIN } })}<|eom_id|>`,
        },
        { content: JSON.stringify({ name: "moss", arguments: { code: MAIN } }) },
        { content: "All three printed hi." },
      ],
      { outcomes: [{ ok: true }, { ok: true }, { ok: true }] },
    );
    expect(result.stopReason).toBe("answer");
    expect(runtime.requests).toHaveLength(3);
  });

  it("tells the model once when an answer has neither code nor a clear final answer, then stops with unclear-answer", async () => {
    const { result, events, requests } = await runAgainst([
      { content: "Let me check the list:" },
      { content: "```python\nprint('hi')\n```" },
    ]);
    expect(result.stopReason).toBe("unclear-answer");
    expect(result.reason).toContain("code block but no TypeScript");
    expect(result.answer).toContain("print('hi')");
    const notices = events.filter((event) => event.type === "notice");
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({ kind: "unclear-answer" });
    expect(roles(requests[1]!.body)).toBe("system,user,assistant,user");
    expect(requests[1]!.body.messages.at(-1).content).toContain("announced a next step but held no code");
    expect(requests[1]!.body.messages.at(-1).content).toContain("call the `moss` tool");
  });

  it("reads what a model answers after its <think> block, never a draft inside it", async () => {
    const draft = "```typescript\nasync function main(moss: Moss) {\n  draft();\n}\n```";
    const { runtime, result } = await runAgainst(
      [
        {
          content: `<think>\nMaybe:\n${draft}\nNo, better to print.\n</think>\n\n\`\`\`typescript\n${MAIN}\n\`\`\``,
        },
        { content: `<think>${draft}</think>\nLet me know if you need more: it printed hi.` },
      ],
      { outcomes: [{ ok: true }] },
    );
    expect(runtime.requests.map((request) => request.code)).toEqual([MAIN]);
    expect(result.stopReason).toBe("answer");
  });

  it("accepts the clear answer that follows the notice", async () => {
    const { result } = await runAgainst([{ content: "" }, { content: "Nothing to do: the list is empty." }]);
    expect(result).toMatchObject({ stopReason: "answer", answer: "Nothing to do: the list is empty." });
  });
});

describe("output limits", () => {
  it("sends a default max_tokens, and a rambling model is cut off, told so, and stops with truncated", async () => {
    const { result, requests, events, runtime } = await runAgainst(
      [{ ramble: true }, { ramble: true }, { ramble: true }],
      { serverContextTokens: 100_000, contextTokens: 100_000 },
    );
    expect(requests[0]!.body.max_tokens).toBe(DEFAULT_MAX_TOKENS);
    expect(result.stopReason).toBe("truncated");
    expect(result.answer).toBeUndefined();
    expect(result.reason).toContain(`output limit of ${DEFAULT_MAX_TOKENS} tokens 3 time(s)`);
    expect(runtime.requests).toHaveLength(0);
    expect(events.filter((event) => event.type === "notice")).toHaveLength(2);
    expect(roles(requests[1]!.body)).toBe("system,user,assistant,user");
    expect(requests[1]!.body.messages.at(-1).content).toContain("cut off at the output limit");
  });

  it("a cut-off answer whose code is complete runs; a cut-off final answer is asked again", async () => {
    const call = JSON.stringify({ name: "moss", arguments: { code: MAIN } });
    const { result, runtime } = await runAgainst(
      [
        { content: `<tool_call>${call}</tool_call>\nNow I will explain at length`, finishReason: "length" },
        { content: "The ball rolled and then", finishReason: "length" },
        { content: "Printed hi." },
      ],
      { outcomes: [{ ok: true }] },
    );
    expect(runtime.requests).toHaveLength(1);
    expect(result).toMatchObject({ stopReason: "answer", answer: "Printed hi.", steps: 3 });
  });

  it("a structured tool call cut mid-arguments gets a tool result saying so (never run, never final)", async () => {
    const { requests, runtime } = await runAgainst([
      {
        toolCalls: [{ name: "moss", arguments: '{"code": "async function main(moss: Moss) {\\n  con' }],
        finishReason: "length",
      },
      { content: "Gave up." },
    ]);
    expect(runtime.requests).toHaveLength(0);
    expect(roles(requests[1]!.body)).toBe("system,user,assistant,tool");
    expect(requests[1]!.body.messages.at(-1).content).toContain("cut off at the output limit");
  });

  it("a small context reported by the server lowers the default max_tokens to a quarter of it", async () => {
    const { requests } = await runAgainst([{ content: "Done." }], { serverContextTokens: 4_096 });
    expect(requests[0]!.body.max_tokens).toBe(1_024);
  });
});

describe("a 200 that is not a completion is a model-request error naming the server", () => {
  const cases: Array<[string, FakeReply, boolean, string]> = [
    ["an HTML body", { raw: "<html>502 Bad Gateway</html>" }, false, "not JSON"],
    ["a broken JSON body", { raw: "{not json", contentType: "application/json" }, false, "not valid JSON"],
    ["no choices", { content: "x", noChoices: true }, false, "no choices"],
    ["no finish reason", { content: "x", noFinishReason: true }, false, "no finish_reason"],
    ["a stream of no chunks", { raw: "hello", contentType: "text/event-stream" }, true, "no chunks"],
    ["a stream without choices", { content: "x", noChoices: true }, true, "had a choice"],
  ];
  for (const [label, reply, stream, words] of cases) {
    it(`${label} (${stream ? "streaming" : "not streaming"})`, async () => {
      const { result } = await runAgainst([reply], { stream });
      expect(result.stopReason).toBe("error");
      expect(MossError.is(result.error, "model-request")).toBe(true);
      const message = (result.error as MossError).message;
      expect(message).toContain(server!.baseUrl);
      expect(message).toContain(words);
      expect(result.reason).toBe(message);
    });
  }
});

describe("a stream cut mid-answer", () => {
  it("says after how many chunks, keeps the partial answer as an abandoned branch, and a retry starts clean", async () => {
    server = await startFakeOpenAIServer([
      { content: "I am writing a long answer that never ends", cutAfterChunks: 4 },
      { content: "Done." },
    ]);
    const store = new MemoryConversationStore();
    const agent = () =>
      new MossAgent({
        model: openai(server!.baseUrl),
        createRuntime: async () => new ScriptedRuntime([]),
        sessionId: "s",
        conversationStore: store,
      });
    const first = await agent().run("say hi");
    expect(first.stopReason).toBe("error");
    expect((first.error as MossError).message).toContain("closed the stream after 4 chunks");
    const conversation = (await store.load("s"))!;
    expect(conversation.head).toMatchObject({ role: "user", content: "say hi" });
    const [abandoned] = conversation.children(conversation.head!.id);
    // 4 chunks: the role chunk, then 3 content chunks of 7 characters.
    expect(abandoned).toMatchObject({ role: "assistant", content: "I am writing a long a" });
    expect(abandoned!.metadata.abandoned).toBe("stream-cut");
    const second = await agent().run("say hi");
    expect(second.stopReason).toBe("answer");
    expect(roles(server.requests[1]!.body)).toBe("system,user");
  });
});

describe("a stream with a chunk that is not JSON", () => {
  it("is a model-request error naming the chunk, and the partial answer is abandoned", async () => {
    server = await startFakeOpenAIServer([{ content: "partial answer here", garbageAfterChunks: 2 }]);
    const agent = new MossAgent({
      model: openai(server.baseUrl),
      createRuntime: async () => new ScriptedRuntime([]),
    });
    const result = await agent.run("say hi");
    expect(MossError.is(result.error, "model-request")).toBe(true);
    expect((result.error as MossError).message).toContain("chunk 3 of its stream is not valid JSON");
    expect(agent.conversation.head).toMatchObject({ role: "user", content: "say hi" });
    expect(agent.conversation.children(agent.conversation.head!.id)[0]).toMatchObject({
      content: "partial",
      metadata: { abandoned: "invalid-response" },
    });
  });
});

describe("resuming is always well-formed", () => {
  it("a run that failed before any answer is not followed by a second task message", async () => {
    server = await startFakeOpenAIServer([
      { status: 500, error: { message: "model loading" } },
      { status: 500, error: { message: "model loading" } },
      { content: "Done." },
    ]);
    const store = new MemoryConversationStore();
    const run = (task: string) =>
      new MossAgent({
        model: openai(server!.baseUrl),
        createRuntime: async () => new ScriptedRuntime([]),
        sessionId: "s",
        conversationStore: store,
      }).run(task);
    expect((await run("say hi")).stopReason).toBe("error");
    expect((await run("say hi")).stopReason).toBe("error");
    expect((await run("say hello instead")).stopReason).toBe("answer");
    expect(server.requests.map((request) => roles(request.body))).toEqual([
      "system,user",
      "system,user",
      "system,user",
    ]);
    expect(server.requests[2]!.body.messages[1].content).toBe("say hello instead");
    const conversation = (await store.load("s"))!;
    expect(conversation.children(undefined).map((message) => message.content)).toEqual([
      "say hi",
      "say hello instead",
    ]);
  });

  it("a new task after an observation that was never answered is joined into one user turn", async () => {
    server = await startFakeOpenAIServer([
      { content: `\`\`\`typescript\n${MAIN}\n\`\`\`` },
      { status: 500, error: { message: "crashed" } },
      { content: "Done." },
    ]);
    const store = new MemoryConversationStore();
    const run = (task: string) =>
      new MossAgent({
        model: openai(server!.baseUrl),
        createRuntime: async () => new ScriptedRuntime([]),
        sessionId: "s",
        conversationStore: store,
        tools: false,
      }).run(task);
    expect((await run("say hi")).stopReason).toBe("error");
    expect((await run("and again")).stopReason).toBe("answer");
    expect(roles(server.requests[2]!.body)).toBe("system,user,assistant,user");
    expect(server.requests[2]!.body.messages.at(-1).content).toMatch(/<execution[\s\S]*and again$/);
  });
});

describe("the context window", () => {
  // Digits: o200k_base counts more tokens for them than the server's characters / 4, so only the window limits.
  const bigStdout = `${"0123456789 ".repeat(400)}\n`;
  const step = { toolCalls: [{ name: "moss", arguments: JSON.stringify({ code: MAIN }) }] };

  it("shortens old observations and steps to fit the server's n_ctx, says so, and never overflows", async () => {
    const { result, requests, events } = await runAgainst(
      [step, step, step, step, step, step, { content: "Done." }],
      {
        serverContextTokens: 4_096,
        maxSteps: 10,
        outcomes: Array.from({ length: 6 }, () => ({ ok: true, stdout: bigStdout })),
      },
    );
    expect(result.stopReason).toBe("answer");
    const trims = events.filter((event) => event.type === "context-trimmed");
    expect(trims.length).toBeGreaterThan(0);
    expect(trims[0]).toMatchObject({ contextTokens: 4_096 });
    expect((trims.at(-1) as { message: string }).message).toMatch(/shortened \d+ old observation/);
    const last = requests.at(-1)!.body;
    expect(last.messages[0].role).toBe("system");
    expect(last.messages[1]).toEqual({ role: "user", content: "say hi" });
    // The latest step is kept whole.
    expect(last.messages.at(-1).content).toContain("0123456789 ".repeat(300));
    for (const request of requests) expect(roles(request.body)).toMatch(/^system,user(,assistant(,tool)+)*$/);
  });

  it("a 400 context overflow from the server shortens harder and asks once more", async () => {
    // Letters: the server (characters / 4) counts far more tokens than o200k_base does for them.
    const letters = `${"x".repeat(8_000)}\n`;
    const { result, requests, events } = await runAgainst([step, step, step, { content: "Done." }], {
      serverContextTokens: 4_000,
      // We believe the context is larger than it is: the server's 400 must correct us.
      contextTokens: 16_384,
      outcomes: Array.from({ length: 3 }, () => ({ ok: true, stdout: letters })),
    });
    expect(result.stopReason).toBe("answer");
    const overflows = events.filter((event) => event.type === "notice" && event.kind === "context-overflow");
    expect(overflows).toHaveLength(1);
    expect((overflows[0] as { message: string }).message).toContain("of 4000 tokens");
    // One rejected request, then every request fits.
    expect(requests.length).toBe(5);
  });

  it("a second 400 context overflow for the same step fails the run with the server's words", async () => {
    const openaiWording = {
      status: 400,
      error: {
        message:
          "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens.",
        code: "context_length_exceeded",
      },
    };
    server = await startFakeOpenAIServer([contextOverflowError(9_000, 4_096), openaiWording]);
    const agent = new MossAgent({
      model: openai(server.baseUrl),
      createRuntime: async () => new ScriptedRuntime([]),
    });
    const result = await agent.run("go");
    expect(result.stopReason).toBe("error");
    expect(MossError.is(result.error, "model-request")).toBe(true);
    expect(result.reason).toContain("does not fit the model's context");
    expect(server.requests.length).toBeLessThanOrEqual(2);
  });

  it("a session that outgrew the context resumes", async () => {
    server = await startFakeOpenAIServer(
      [step, step, step, step, { content: "Done." }, { content: "Still here." }],
      { contextTokens: 3_000 },
    );
    const store = new MemoryConversationStore();
    const run = (task: string) =>
      new MossAgent({
        model: openai(server!.baseUrl),
        createRuntime: async () =>
          new ScriptedRuntime(Array.from({ length: 4 }, () => ({ ok: true, stdout: bigStdout }))),
        sessionId: "s",
        conversationStore: store,
      }).run(task);
    expect((await run("fill it")).stopReason).toBe("answer");
    expect((await store.load("s"))!.thread().length).toBe(10);
    expect((await run("are you there?")).stopReason).toBe("answer");
  });

  it("fails clearly when the system prompt and the task alone do not fit", async () => {
    server = await startFakeOpenAIServer([]);
    const agent = new MossAgent({
      model: openai(server.baseUrl),
      createRuntime: async () => new ScriptedRuntime([]),
      contextTokens: 400,
      maxTokens: 100,
    });
    const result = await agent.run("word ".repeat(500));
    expect(result.stopReason).toBe("error");
    expect((result.error as MossError).message).toMatch(/The system prompt and the task take \d+ tokens/);
    expect(server.requests).toHaveLength(0);
  });
});
