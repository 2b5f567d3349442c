// End to end: MossAgent with the real openai client (against a local server), the real MossCompiler /
// MossRuntime (process sandbox), FileContextStore and the examples/todo context module.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { type AgentEvent, MossAgent } from "../../engine/agent/moss-agent.ts";
import { OpenAILanguageModel } from "../../engine/agent/openai-language-model.ts";
import { FileContextStore } from "../../engine/context/index.ts";
import { FileConversationStore } from "../../engine/model/conversation-store.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "./fake-openai-server.ts";

const MODULE = "examples/todo/context.ts";
let server: FakeOpenAIServer | undefined;
let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-agent-"));
  process.env.MOSS_TODO_FILE = join(directory, "todo.json");
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  delete process.env.MOSS_TODO_FILE;
  await rm(directory, { recursive: true, force: true });
});
afterAll(async () => {
  await closeSharedSandboxes();
});

const tool = (code: string) => ({ name: "moss", arguments: JSON.stringify({ code }) });
const model = (baseUrl: string) =>
  new OpenAILanguageModel({ baseUrl, apiKey: "k", model: "gpt-test", maxRetries: 0, env: {} });

async function todoFile(): Promise<{ items: Array<{ title: string; tags: string[]; done: boolean }> }> {
  return JSON.parse(await readFile(join(directory, "todo.json"), "utf8"));
}

describe("MossAgent with the real runtime", () => {
  it("fixes its own type error after the diagnostic comes back", async () => {
    server = await startFakeOpenAIServer([
      {
        content: "I'll add the item.",
        toolCalls: [
          tool(
            'async function main(moss: Moss) {\n  await moss.todos.create("buy milk", { tags: ["home"] });\n}',
          ),
        ],
      },
      {
        content: "TodoList has no create; the method is `add`.",
        toolCalls: [
          tool(
            'async function main(moss: Moss) {\n  const item = await moss.todos.add("buy milk", { tags: ["home"] });\n  console.log("added #" + item.id);\n  return item;\n}',
          ),
        ],
      },
      { content: "Added “buy milk” (#1) under home." },
    ]);
    const agent = new MossAgent({ model: model(server.baseUrl), modulePath: MODULE });
    const events: AgentEvent[] = [];
    try {
      const result = await agent.run("Add 'buy milk' to my home list.", {
        onEvent: (event) => events.push(event),
      });
      expect(result).toMatchObject({
        stopReason: "answer",
        steps: 3,
        answer: "Added “buy milk” (#1) under home.",
      });
    } finally {
      await agent.close();
    }
    const executions = events.filter((event) => event.type === "execution");
    expect(executions.map((event) => event.execution.ok)).toEqual([false, true]);
    expect(executions[0]!.execution.error?.kind).toBe("type");

    const afterTypo = server.requests[1]!.body.messages.at(-1);
    expect(afterTypo.role).toBe("tool");
    expect(afterTypo.content).toContain("<diagnostics>");
    expect(afterTypo.content.match(/TS2339/g)).toHaveLength(1);
    expect(afterTypo.content).toMatch(
      /snippet\.ts:2:20 - error TS2339: Property 'create' does not exist on type 'TodoList'\.\n> 2 \| {3}await moss\.todos\.create/,
    );
    const afterFix = server.requests[2]!.body.messages.at(-1);
    expect(afterFix.content).toContain("<stdout>\nadded #1\n</stdout>");
    expect(afterFix.content).toContain("title: 'buy milk'");
    expect((await todoFile()).items).toEqual([{ id: 1, title: "buy milk", done: false, tags: ["home"] }]);
    const system = server.requests[0]!.body.messages[0].content;
    expect(system).toContain("abstract add(title: string");
    expect(system).not.toContain("__moss_test_cases__");
  });

  it("resumes a saved session in a fresh agent: data fields, services' state and the conversation", async () => {
    server = await startFakeOpenAIServer([
      {
        toolCalls: [
          tool(
            'async function main(moss: Moss) {\n  moss.preferences.push("tag errands with home");\n  moss.lastReview = new Date("2030-01-02T03:04:05Z");\n  await moss.todos.add("post letter", { tags: ["home"] });\n}',
          ),
        ],
      },
      { content: "Noted." },
      {
        toolCalls: [
          tool(
            "async function main(moss: Moss) {\n  return { preferences: moss.preferences, review: moss.lastReview?.toISOString(), open: (await moss.todos.list({ done: false })).length };\n}",
          ),
        ],
      },
      { content: "You prefer errands tagged home." },
    ]);
    const sessions = join(directory, "sessions");
    const first = {
      store: new FileContextStore(sessions),
      conversations: new FileConversationStore(sessions),
    };
    const agentOne = new MossAgent({
      model: model(server.baseUrl),
      modulePath: MODULE,
      sessionId: "s1",
      store: first.store,
      conversationStore: first.conversations,
    });
    expect((await agentOne.run("Remember: errands get the home tag.")).stopReason).toBe("answer");
    await agentOne.close();
    await first.store.close();

    const saved = JSON.parse(await readFile(join(sessions, "s1.json"), "utf8"));
    expect(JSON.stringify(saved.properties.preferences)).toContain("tag errands with home");

    const store = new FileContextStore(sessions);
    const agentTwo = new MossAgent({
      model: model(server.baseUrl),
      modulePath: MODULE,
      sessionId: "s1",
      store,
      conversationStore: new FileConversationStore(sessions),
    });
    try {
      const result = await agentTwo.run("What do you know about my preferences?");
      expect(result.answer).toBe("You prefer errands tagged home.");
    } finally {
      await agentTwo.close();
      await store.close();
    }
    const resumed = server.requests[2]!.body.messages;
    expect(resumed[1]).toEqual({ role: "user", content: "Remember: errands get the home tag." });
    expect(resumed.at(-1)).toEqual({ role: "user", content: "What do you know about my preferences?" });
    const observation = server.requests[3]!.body.messages.at(-1).content;
    expect(observation).toContain("preferences: [ 'tag errands with home' ]");
    expect(observation).toContain("review: '2030-01-02T03:04:05.000Z'");
    expect(observation).toContain("open: 1");
    const conversation = JSON.parse(await readFile(join(sessions, "s1.conversation.json"), "utf8"));
    expect(conversation.messages.filter((message: { role: string }) => message.role === "user")).toHaveLength(
      2,
    );
  });

  it("returns runtime errors with the failing line to the model", async () => {
    server = await startFakeOpenAIServer([
      {
        toolCalls: [
          tool(
            "async function main(moss: Moss) {\n  console.log('before');\n  await moss.todos.complete(99);\n}",
          ),
        ],
      },
      { content: "There is no item 99." },
    ]);
    const agent = new MossAgent({ model: model(server.baseUrl), modulePath: MODULE, stream: false });
    try {
      await agent.run("Complete item 99.");
    } finally {
      await agent.close();
    }
    const observation = server.requests[1]!.body.messages.at(-1).content;
    expect(observation).toContain('<error kind="runtime">');
    expect(observation).toContain("RangeError: no todo item has id 99");
    expect(observation).toContain("> 3 |   await moss.todos.complete(99);");
    expect(observation).toContain("<stdout>\nbefore\n</stdout>");
  });
});
