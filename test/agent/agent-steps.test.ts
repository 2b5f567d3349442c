// One small test per step of the agent loop (engine/agent/*.ts, after the Vercel AI SDK's generate-text/): each
// step is a function the loop calls and a server may call on its own.
import { describe, expect, it } from "vitest";
import type { AgentEvent, AgentRuntime } from "../../engine/agent/agent-types.ts";
import { askModel } from "../../engine/agent/ask-model.ts";
import { chatMessages } from "../../engine/agent/chat-messages.ts";
import { checkAgentOptions } from "../../engine/agent/check-agent-options.ts";
import { eventStream } from "../../engine/agent/event-stream.ts";
import { noCodeObservation, notResumedObservation } from "../../engine/agent/observation.ts";
import { type PendingStep, pendingSteps } from "../../engine/agent/pending-step.ts";
import { persistSession } from "../../engine/agent/persist-session.ts";
import { runAction } from "../../engine/agent/run-action.ts";
import { sizeRunWindow } from "../../engine/agent/run-window.ts";
import { ScriptedLanguageModel } from "../../engine/agent/scripted-language-model.ts";
import { stepActions } from "../../engine/agent/step-actions.ts";
import { unclearAnswer } from "../../engine/agent/unclear-answer.ts";
import { MossError } from "../../engine/errors.ts";
import { Conversation } from "../../engine/model/conversation.ts";
import { MemoryConversationStore } from "../../engine/model/conversation-store.ts";
import type { LanguageModel } from "../../engine/model/language-model.ts";
import type { Execution, MossContext } from "../../engine/types.ts";

const MAIN = "async function main(moss: Moss) {\n  return 1;\n}";
const CONTEXT: MossContext = { version: 1, module: "m.ts", properties: {}, executed: true } as MossContext;
const model = new ScriptedLanguageModel([]);

describe("checkAgentOptions", () => {
  it("fills in the defaults", () => {
    expect(checkAgentOptions({ model, modulePath: "m.ts" })).toMatchObject({
      maxSteps: 10,
      maxConsecutiveErrors: 3,
      maxContinuations: 2,
      tools: true,
    });
  });

  it("names the bad option", () => {
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ maxSteps: 0 }, "maxSteps must be a positive integer, got 0."],
      [{ maxConsecutiveErrors: 1.5 }, "maxConsecutiveErrors must be a positive integer, got 1.5."],
      [{ maxTokens: -1 }, "maxTokens must be a positive integer, got -1."],
      [{ maxContinuations: -1 }, "maxContinuations must be a non-negative integer, got -1."],
      [{ maxTokens: 1000, contextTokens: 1000 }, "leaves no room for the prompt"],
    ];
    for (const [options, message] of bad) {
      expect(() => checkAgentOptions({ model, modulePath: "m.ts", ...options })).toThrow(message);
    }
    expect(() => checkAgentOptions({ model })).toThrow("MossAgent needs a modulePath");
  });
});

describe("sizeRunWindow", () => {
  it("keeps a default output limit to a quarter of a small context; a scale shrinks the prompt budget", () => {
    const small = sizeRunWindow(4000, undefined);
    expect(small.maxTokens).toBe(1000);
    expect(small.budgetTokens).toBeGreaterThan(0);
    expect(sizeRunWindow(4000, 500).maxTokens).toBe(500);
    const scaled = sizeRunWindow(4000, undefined, 0.5);
    expect(scaled.budgetTokens).toBe(Math.floor((small.budgetTokens / 1) * 0.5));
    expect(() => sizeRunWindow(100, 100)).toThrow("leaves no room for the prompt");
  });
});

describe("stepActions", () => {
  it("one action per tool call; a call to another tool is told there is only moss", () => {
    const actions = stepActions({
      content: "",
      toolCalls: [
        { id: "a", name: "moss", arguments: JSON.stringify({ code: MAIN }) },
        { id: "b", name: "shell", arguments: "{}" },
      ],
    });
    expect(actions[0]).toMatchObject({ toolCall: { id: "a" }, extracted: { kind: "code", code: MAIN } });
    expect(actions[1]!.extracted).toEqual({
      kind: "invalid",
      reason: 'There is no tool named "shell"; the only tool is "moss".',
    });
  });

  it("reads tool calls written as text, then code in prose; a plain answer has no action", () => {
    const text = `<tool_call>${JSON.stringify({ name: "moss", arguments: { code: MAIN } })}</tool_call>`;
    expect(stepActions({ content: text, toolCalls: [] })).toEqual([
      { extracted: { kind: "code", code: MAIN, source: "tool-text" } },
    ]);
    expect(
      stepActions({ content: `<think>\`\`\`ts\nx\n\`\`\`</think>Here:\n~~~ts\n${MAIN}\n~~~`, toolCalls: [] }),
    ).toEqual([{ extracted: { kind: "code", code: MAIN, source: "fence" } }]);
    expect(stepActions({ content: "Done: 3 items.", toolCalls: [] })).toEqual([]);
  });
});

describe("chatMessages", () => {
  it("maps the thread to chat messages, marking tasks and observations, with their images", () => {
    const conversation = new Conversation();
    const image = { mediaType: "image/png", data: "aGk=" };
    conversation.append("user", "Look.", { kind: "task" }, [image]);
    conversation.append("assistant", "", { toolCalls: [{ id: "c1", name: "moss", arguments: "{}" }] });
    conversation.append("tool", '<execution ok="true">', { kind: "observation", toolCallId: "c1" }, [image]);
    conversation.append("user", "notice", { kind: "notice" });
    expect(chatMessages(conversation.thread())).toEqual([
      { message: { role: "user", content: "Look.", images: [image] }, kind: "task" },
      {
        message: { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "moss", arguments: "{}" }] },
        kind: "turn",
      },
      {
        message: { role: "tool", content: '<execution ok="true">', toolCallId: "c1", images: [image] },
        kind: "observation",
      },
      { message: { role: "user", content: "notice" }, kind: "observation" },
    ]);
  });
});

describe("pendingSteps: pause/resume bookkeeping on the conversation", () => {
  it("records a pause on the head with one event per request, finds it, and clears it", () => {
    const conversation = new Conversation();
    const assistant = conversation.append("assistant", "", { toolCalls: [] });
    const pending: PendingStep = {
      continuation: "c",
      requests: [
        { kind: "approval", id: "r1", member: "send", args: [], reason: "tag" },
        { kind: "clarification", id: "r2", question: "Which?" },
      ],
      assistantId: assistant.id,
      actionIndex: 0,
      step: 1,
      code: MAIN,
      failedBefore: false,
    };
    const events: AgentEvent[] = [];
    pendingSteps.record(conversation, pending, (event) => events.push(event));
    expect(events.map((event) => event.type)).toEqual(["approval-request", "clarification-request"]);
    expect(pendingSteps.of(conversation)).toEqual(pending);
    pendingSteps.clear(conversation);
    expect(pendingSteps.of(conversation)).toBeUndefined();
  });

  it("closing a paused step answers the paused call and every later call of the step, and says so", () => {
    const conversation = new Conversation();
    const calls = ["c1", "c2", "c3"].map((id) => ({ id, name: "moss", arguments: "{}" }));
    const assistant = conversation.append("assistant", "", { toolCalls: calls });
    conversation.append("tool", "ok", { toolCallId: "c1" });
    pendingSteps.record(
      conversation,
      {
        continuation: "c",
        requests: [],
        assistantId: assistant.id,
        actionIndex: 1,
        step: 2,
        code: MAIN,
        toolCallId: "c2",
        failedBefore: false,
      },
      () => {},
    );
    const events: AgentEvent[] = [];
    pendingSteps.close(
      conversation,
      "a new task was given instead of answers",
      CONTEXT,
      (event) => events.push(event),
      (role, content, metadata) => conversation.append(role, content, metadata),
    );
    expect(events).toEqual([
      {
        type: "notice",
        step: 2,
        kind: "pending-abandoned",
        message:
          "The paused run of step 2 a new task was given instead of answers; nothing it did persisted.",
      },
    ]);
    const answered = conversation.thread().filter((message) => message.role === "tool");
    expect(answered.map((message) => message.metadata.toolCallId)).toEqual(["c1", "c2", "c3"]);
    expect(answered[1]!.content).toBe(notResumedObservation("a new task was given instead of answers"));
    expect(answered[2]!.content).toBe(notResumedObservation("so this later call did not run"));
    expect(pendingSteps.of(conversation)).toBeUndefined();
  });
});

describe("observation texts", () => {
  it("say why nothing ran", () => {
    expect(noCodeObservation("No code was found.")).toBe(
      '<execution ok="false">\n<error kind="no-code">\nNo code was found.\n</error>\n</execution>',
    );
    expect(notResumedObservation("x")).toContain("waiting for a person, and x. Nothing it did persisted.");
  });
});

describe("persistSession", () => {
  it("saves the context, then the conversation, only for a session with the stores", async () => {
    const saved: string[] = [];
    const store = {
      load: async () => undefined,
      save: async (id: string) => {
        saved.push(`context ${id}`);
      },
    };
    const conversations = new MemoryConversationStore();
    const conversation = new Conversation();
    conversation.append("user", "hello", { kind: "task" });
    await persistSession({ store, conversationStore: conversations }, conversation, CONTEXT);
    expect(saved).toEqual([]);
    await persistSession({ sessionId: "s", store, conversationStore: conversations }, conversation, CONTEXT);
    expect(saved).toEqual(["context s"]);
    expect((await conversations.load("s"))?.thread().map((message) => message.content)).toEqual(["hello"]);
    await persistSession({ sessionId: "s", store }, conversation);
    expect(saved).toEqual(["context s"]);
  });
});

describe("eventStream", () => {
  it("yields the run's events in order, ends when it settles, and rethrows its failure", async () => {
    const events = eventStream(async (onEvent) => {
      onEvent({ type: "text-delta", step: 1, delta: "a" });
      await new Promise((resolve) => setImmediate(resolve));
      onEvent({ type: "text-delta", step: 1, delta: "b" });
    });
    const seen: string[] = [];
    for await (const event of events) if (event.type === "text-delta") seen.push(event.delta);
    expect(seen).toEqual(["a", "b"]);
    const failing = eventStream(async () => {
      throw new MossError("model-request", "down");
    });
    await expect(
      (async () => {
        for await (const _ of failing) {
        }
      })(),
    ).rejects.toThrow("down");
  });
});

describe("unclearAnswer: the final-answer heuristic", () => {
  it("an answer that announces more, or holds code that cannot run, is not final", () => {
    expect(unclearAnswer("The list has 3 items.")).toBeUndefined();
    expect(unclearAnswer("Let me check the list")).toBe("announced a next step but held no code to run");
    expect(unclearAnswer("```python\nprint(1)\n```")).toContain("`python` code block");
    expect(unclearAnswer("  ")).toBe("was empty");
  });
});

describe("askModel", () => {
  it("sends the fitted thread with the moss tool, streams deltas, and reports a trim", async () => {
    const scripted = new ScriptedLanguageModel([{ content: "fine" }]);
    const events: AgentEvent[] = [];
    const long = "x ".repeat(3000);
    const response = await askModel({
      model: scripted,
      system: "system",
      window: sizeRunWindow(2000, 200),
      entries: [
        { message: { role: "user", content: "task" }, kind: "task" },
        {
          message: {
            role: "assistant",
            content: "",
            toolCalls: [{ id: "c", name: "moss", arguments: "{}" }],
          },
          kind: "turn",
        },
        { message: { role: "tool", content: long, toolCallId: "c" }, kind: "observation" },
      ],
      tools: true,
      maxTokens: 200,
      stream: true,
      step: 1,
      emit: (event) => events.push(event),
      onPartial: async () => {},
    });
    expect(response.content).toBe("fine");
    expect(scripted.requests[0]!.tools?.map((tool) => tool.name)).toEqual(["moss"]);
    expect(scripted.requests[0]!.maxTokens).toBe(200);
    expect(events.map((event) => event.type)).toContain("context-trimmed");
    expect(events.filter((event) => event.type === "text-delta").length).toBeGreaterThan(0);
  });

  it("after the server's context overflow, shortens harder and asks once more", async () => {
    let calls = 0;
    const overflowing: LanguageModel = {
      model: "m",
      async generate() {
        calls += 1;
        if (calls === 1) {
          throw new MossError("model-request", "too long", {
            reason: "context-overflow",
            promptTokens: 5000,
          });
        }
        return {
          content: "ok",
          toolCalls: [],
          inputTokens: 1,
          outputTokens: 1,
          cost: 0,
          model: "m",
          finishReason: "stop",
        };
      },
      stream() {
        throw new Error("not streamed");
      },
    };
    const window = sizeRunWindow(8000, 500);
    const events: AgentEvent[] = [];
    const response = await askModel({
      model: overflowing,
      system: "system",
      window,
      entries: [
        { message: { role: "user", content: "task" }, kind: "task" },
        {
          message: {
            role: "assistant",
            content: "",
            toolCalls: [{ id: "c", name: "moss", arguments: "{}" }],
          },
          kind: "turn",
        },
        { message: { role: "tool", content: "observed ".repeat(400), toolCallId: "c" }, kind: "observation" },
        { message: { role: "assistant", content: "next" }, kind: "turn" },
      ],
      tools: false,
      maxTokens: 500,
      stream: false,
      step: 1,
      emit: (event) => events.push(event),
      onPartial: async () => {},
    });
    expect(response.content).toBe("ok");
    expect(calls).toBe(2);
    expect(window.scale).toBeLessThan(1);
    expect(events.find((event) => event.type === "notice")).toMatchObject({ kind: "context-overflow" });
  });
});

describe("runAction", () => {
  const runtime = (execution: Partial<Execution>): AgentRuntime => ({
    execute: async () => ({
      ok: true,
      returns: 1,
      stdout: "",
      warnings: [],
      context: CONTEXT,
      durationMs: 1,
      calls: [],
      ...execution,
    }),
    prompter: () => ({ dumpModulePrompt: async () => "" }),
    dumpContext: () => CONTEXT,
    close: async () => {},
  });

  it("runs the code, emits code and execution, and returns the observation with the images shown", async () => {
    const image = { mediaType: "image/png", data: "aGk=" };
    const events: AgentEvent[] = [];
    const result = await runAction(
      runtime({ images: [image] }),
      {
        toolCall: { id: "c1", name: "moss", arguments: "{}" },
        extracted: { kind: "code", code: MAIN, source: "tool" },
      },
      3,
      (event) => events.push(event),
    );
    expect(events.map((event) => event.type)).toEqual(["code", "execution"]);
    expect(result).toMatchObject({
      ok: true,
      images: [image],
      metadata: { kind: "observation", code: MAIN },
    });
    expect(result.paused === undefined && result.observation).toContain("<returns>");
  });

  it("a paused run returns the pause without an observation; an action without code says why", async () => {
    const paused = await runAction(
      runtime({ ok: false, pending: { requests: [], continuation: "c" } }),
      { extracted: { kind: "code", code: MAIN, source: "fence" } },
      1,
      () => {},
    );
    expect(paused).toEqual({ ok: false, paused: { requests: [], continuation: "c" }, code: MAIN });
    const cut = await runAction(runtime({}), { extracted: { kind: "none" } }, 1, () => {}, { cutOffAt: 64 });
    expect(cut.paused === undefined && cut.observation).toBe(
      noCodeObservation(
        "Your answer was cut off at the output limit of 64 tokens before this call was complete.",
      ),
    );
  });
});
