// The loop's own logic (stop conditions, events, branches, tool-call bookkeeping) over the real `openai`
// client and a local server; the runtime is a scripted stand-in here, the real one runs in moss-agent.test.ts.
import { afterEach, describe, expect, it } from "vitest";
import { type AgentEvent, MossAgent } from "../../engine/agent/moss-agent.ts";
import { OpenAILanguageModel } from "../../engine/agent/openai-language-model.ts";
import { ScriptedLanguageModel } from "../../engine/agent/scripted-language-model.ts";
import { MossError } from "../../engine/errors.ts";
import type { Execution, MossContext } from "../../engine/types.ts";
import { type FakeOpenAIServer, refusedBaseUrl, startFakeOpenAIServer } from "./fake-openai-server.ts";
import { ScriptedRuntime } from "./scripted-runtime.ts";

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const code = (body: string) => JSON.stringify({ code: `async function main(moss: Moss) {\n  ${body}\n}` });
const failure: Partial<Execution> = {
  ok: false,
  error: { kind: "runtime", name: "Error", message: "boom", line: 2, column: 3 },
};

function openai(baseUrl: string) {
  return new OpenAILanguageModel({ baseUrl, apiKey: "k", model: "gpt-test", maxRetries: 0, env: {} });
}

describe("MossAgent loop", () => {
  it("streams events in order and stops on an answer without code", async () => {
    server = await startFakeOpenAIServer([
      { content: "Counting.", toolCalls: [{ name: "moss", arguments: code('console.log("hi");') }] },
      { content: "All done.", promptTokens: 300, completionTokens: 10 },
    ]);
    const runtime = new ScriptedRuntime([{ ok: true, stdout: "hi\n" }]);
    const agent = new MossAgent({ model: openai(server.baseUrl), createRuntime: async () => runtime });
    const events: AgentEvent[] = [];
    for await (const event of agent.events("count")) events.push(event);
    const kinds = events.map((event) =>
      event.type === "message" ? `message:${event.message.role}` : event.type,
    );
    const deltas = kinds.filter((kind) => kind === "text-delta").length;
    expect(deltas).toBeGreaterThan(1);
    expect(kinds.filter((kind) => kind !== "text-delta")).toEqual([
      "run-start",
      "message:user",
      "message:assistant",
      "code",
      "execution",
      "message:tool",
      "message:assistant",
      "run-end",
    ]);
    expect(kinds.indexOf("text-delta")).toBe(2);
    const end = events.at(-1)!;
    expect(end).toMatchObject({
      type: "run-end",
      stopReason: "answer",
      answer: "All done.",
      steps: 2,
      usage: { modelCalls: 2, inputTokens: 400, outputTokens: 30 },
    });
    const second = server.requests[1]!.body;
    expect(second.messages.at(-1)).toMatchObject({
      role: "tool",
      tool_call_id: second.messages.at(-2).tool_calls[0].id,
    });
    expect(second.messages.at(-1).content).toContain("<stdout>\nhi\n</stdout>");
    expect(second.messages[0].role).toBe("system");
    expect(second.messages[0].content).toContain("export class Moss {}");
    expect(second.tools[0].function.name).toBe("moss");
  });

  it("stops after maxConsecutiveErrors failed steps, and a success resets the count", async () => {
    const model = new ScriptedLanguageModel(
      Array.from({ length: 6 }, (_, index) => ({
        toolCalls: [{ name: "moss", arguments: code(`step(${index});`) }],
      })),
    );
    const runtime = new ScriptedRuntime([failure, { ok: true }, failure, failure, failure, { ok: true }]);
    const agent = new MossAgent({ model, createRuntime: async () => runtime, maxConsecutiveErrors: 3 });
    const result = await agent.run("go");
    expect(result.stopReason).toBe("max-consecutive-errors");
    expect(result.steps).toBe(5);
    expect(runtime.requests).toHaveLength(5);
    expect(model.remaining).toBe(1);
  });

  it("counts unusable tool calls as failures and tells the model why", async () => {
    const model = new ScriptedLanguageModel([
      { toolCalls: [{ name: "moss", arguments: "{}" }] },
      { toolCalls: [{ name: "shell", arguments: '{"cmd": "ls"}' }] },
    ]);
    const runtime = new ScriptedRuntime([]);
    const agent = new MossAgent({ model, createRuntime: async () => runtime, maxConsecutiveErrors: 2 });
    const result = await agent.run("go");
    expect(result.stopReason).toBe("max-consecutive-errors");
    expect(runtime.requests).toHaveLength(0);
    const tools = agent.conversation.thread().filter((message) => message.role === "tool");
    expect(tools[0]!.content).toContain("no code was found");
    expect(tools[1]!.content).toContain('There is no tool named "shell"');
  });

  it("stops at maxSteps", async () => {
    const model = new ScriptedLanguageModel(
      Array.from({ length: 5 }, () => ({ toolCalls: [{ name: "moss", arguments: code("ok();") }] })),
    );
    const agent = new MossAgent({ model, createRuntime: async () => new ScriptedRuntime([]), maxSteps: 2 });
    const result = await agent.run("go");
    expect(result).toMatchObject({ stopReason: "max-steps", steps: 2 });
  });

  it("runs one fenced typescript block per answer when tools are off", async () => {
    server = await startFakeOpenAIServer([
      { content: "I will check.\n```typescript\nasync function main(moss: Moss) {\n  return 42;\n}\n```" },
      { content: "The answer is 42." },
    ]);
    const runtime = new ScriptedRuntime([{ ok: true, returns: 42 }]);
    const agent = new MossAgent({
      model: openai(server.baseUrl),
      createRuntime: async () => runtime,
      tools: false,
    });
    const result = await agent.run("compute");
    expect(result).toMatchObject({ stopReason: "answer", answer: "The answer is 42." });
    expect(runtime.requests[0]!.code).toBe("async function main(moss: Moss) {\n  return 42;\n}");
    const second = server.requests[1]!.body;
    expect(second.tools).toBeUndefined();
    expect(second.messages.at(-1).role).toBe("user");
    expect(second.messages.at(-1).content).toContain("<returns>\n42\n</returns>");
    expect(second.messages[0].content).toContain("```typescript block");
  });

  it("reports a model failure as an error event, then run-end, and resolves with stopReason error", async () => {
    const baseUrl = await refusedBaseUrl();
    const events: AgentEvent[] = [];
    const agent = new MossAgent({
      model: openai(baseUrl),
      createRuntime: async () => new ScriptedRuntime([]),
    });
    const result = await agent.run("go", { onEvent: (event) => events.push(event) });
    expect(events.map((event) => event.type)).toEqual(["run-start", "message", "error", "run-end"]);
    const error = events[2] as Extract<AgentEvent, { type: "error" }>;
    expect(MossError.is(error.error, "model-connection")).toBe(true);
    expect(error.message).toContain(baseUrl);
    expect(result.stopReason).toBe("error");
  });

  it("branches a retry at the failed answer's parent and rebuilds the runtime from the context before it", async () => {
    const model = new ScriptedLanguageModel([
      { toolCalls: [{ name: "moss", arguments: code("first();") }] },
      { toolCalls: [{ name: "moss", arguments: code("broken();") }] },
      { content: "gave up" },
      { toolCalls: [{ name: "moss", arguments: code("fixed();") }] },
      { content: "done" },
    ]);
    const contexts: Array<MossContext | undefined> = [];
    const runtimes: ScriptedRuntime[] = [];
    const agent = new MossAgent({
      model,
      createRuntime: async (context) => {
        contexts.push(context);
        runtimes.push(new ScriptedRuntime([{ ok: true }, failure], context));
        return runtimes.at(-1)!;
      },
    });
    expect((await agent.run("task")).answer).toBe("gave up");
    const thread = agent.conversation.thread();
    const failedAnswer = thread.filter((message) => message.role === "assistant")[1]!;
    const result = await agent.retry(failedAnswer.id);
    expect(result).toMatchObject({ stopReason: "answer", answer: "done" });
    const siblings = agent.conversation.children(failedAnswer.parentId);
    expect(siblings.map((message) => message.id)[0]).toBe(failedAnswer.id);
    expect(siblings).toHaveLength(2);
    expect(agent.conversation.thread().map((message) => message.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "tool",
      "assistant",
    ]);
    expect(agent.conversation.thread()[3]!.id).toBe(siblings[1]!.id);
    expect(agent.conversation.leftmostThread().at(-1)!.content).toBe("gave up");
    expect(contexts[1]!.properties).toEqual({ runs: 1 });
    expect(runtimes[0]!.closed).toBe(1);
    const retried = model.requests[3]!.messages;
    expect(retried.some((message) => message.content.includes("broken"))).toBe(false);
    expect(retried.at(-1)!.role).toBe("tool");
  });

  it("answers tool calls an interrupted run left open before asking the model again", async () => {
    const model = new ScriptedLanguageModel([
      { toolCalls: [{ id: "c1", name: "moss", arguments: code("x();") }] },
      { content: "ok" },
    ]);
    let fail = true;
    const runtime = new ScriptedRuntime([]);
    const execute = runtime.execute.bind(runtime);
    runtime.execute = async (request) => {
      if (fail) throw new MossError("runtime-closed", "closed");
      return execute(request);
    };
    const agent = new MossAgent({ model, createRuntime: async () => runtime });
    expect((await agent.run("first")).stopReason).toBe("error");
    fail = false;
    await agent.run("second");
    const messages = model.requests[1]!.messages;
    const toolAnswer = messages.findIndex((message) => message.role === "tool");
    expect(messages[toolAnswer]).toMatchObject({ role: "tool", toolCallId: "c1" });
    expect(messages[toolAnswer]!.content).toContain("interrupted");
    expect(messages[toolAnswer + 1]).toEqual({ role: "user", content: "second" });
  });
});
