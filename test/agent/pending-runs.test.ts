// Paused runs through the agent (issue 10): the real MossRuntime pauses on an `@approval` call or `moss.ask`,
// the agent stops with `pending`, keeps the paused step with the session and resumes it with a person's answers.
// The model is scripted; every transfer that really ran is a line of the vault's log file.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildSystemPrompt } from "../../engine/agent/agent-prompt.ts";
import { type AgentEvent, MossAgent, type MossAgentOptions } from "../../engine/agent/moss-agent.ts";
import { ScriptedLanguageModel, type ScriptedResponse } from "../../engine/agent/scripted-language-model.ts";
import { FileContextStore } from "../../engine/context/index.ts";
import { MossError } from "../../engine/errors.ts";
import { FileConversationStore } from "../../engine/model/conversation-store.ts";
import type { ChatMessage } from "../../engine/model/language-model.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";

const MODULE = "test/agent/fixtures/vault/context.ts";
let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-pending-"));
  process.env.MOSS_VAULT_LOG = join(directory, "vault.log");
});
afterEach(async () => {
  delete process.env.MOSS_VAULT_LOG;
  await rm(directory, { recursive: true, force: true });
});
afterAll(async () => {
  await closeSharedSandboxes();
});

const step = (body: string, content = ""): ScriptedResponse => ({
  content,
  toolCalls: [{ name: "moss", arguments: { code: `async function main(moss: Moss) {\n${body}\n}` } }],
});

/** The transfers that really ran on the host. */
async function transfers(): Promise<string[]> {
  const text = await readFile(process.env.MOSS_VAULT_LOG!, "utf8").catch(() => "");
  return text.split("\n").filter(Boolean);
}

function session(id = "s1"): Pick<MossAgentOptions, "sessionId" | "store" | "conversationStore"> {
  const sessions = join(directory, "sessions");
  return {
    sessionId: id,
    store: new FileContextStore(sessions),
    conversationStore: new FileConversationStore(sessions),
  };
}

async function withAgent<T>(
  responses: ScriptedResponse[],
  body: (agent: MossAgent, model: ScriptedLanguageModel) => Promise<T>,
  options: Partial<MossAgentOptions> = {},
): Promise<T> {
  const model = new ScriptedLanguageModel(responses);
  const agent = new MossAgent({ model, modulePath: MODULE, ...options });
  try {
    return await body(agent, model);
  } finally {
    await agent.close();
    await (options.store as FileContextStore | undefined)?.close();
  }
}

/** The tool messages (observations) of one model request. */
function toolMessages(messages: ChatMessage[]): ChatMessage[] {
  return messages.filter((message) => message.role === "tool");
}

const TRANSFER =
  '  const receipt = await moss.vault.transfer("bob", 5);\n  console.log("sent", receipt);\n  return receipt;';

describe("a paused run in the agent", () => {
  it("stops with pending on an @approval call, emits the request, and approved, the call runs once and the model sees one observation", async () => {
    await withAgent(
      [step(TRANSFER, "Sending."), { content: "Sent 5 euros to bob." }],
      async (agent, model) => {
        const events: AgentEvent[] = [];
        const first = await agent.run("Send bob 5 euros.", { onEvent: (event) => events.push(event) });
        expect(first.stopReason).toBe("pending");
        expect(first.pending).toHaveLength(1);
        const request = first.pending![0]!;
        expect(request).toMatchObject({ kind: "approval", member: "transfer", args: ["bob", 5], line: 2 });
        const requested = events.filter((event) => event.type === "approval-request");
        expect(requested).toEqual([
          {
            type: "approval-request",
            step: 1,
            request,
            description: `#${request.id} approval vault.transfer("bob", 5) at line 2`,
          },
        ]);
        expect(events.at(-1)).toMatchObject({ type: "run-end", stopReason: "pending", pending: [request] });
        expect(await transfers()).toEqual([]);
        expect(await agent.pending()).toEqual([request]);
        expect(model.requests).toHaveLength(1);

        const second = await agent.resume({ [request.id]: { approved: true } });
        expect(second).toMatchObject({ stopReason: "answer", answer: "Sent 5 euros to bob.", steps: 1 });
        expect(await transfers()).toEqual(["bob 5"]);
        const sent = model.requests[1]!.messages;
        const observations = toolMessages(sent);
        expect(observations).toHaveLength(1);
        expect(observations[0]!.content).toContain('<execution ok="true">');
        expect(observations[0]!.content).toContain("sent receipt-1");
        expect(await agent.pending()).toBeUndefined();
        // The session keeps the same: one observation of the paused code, none of the pause itself.
        expect(agent.conversation.thread().map((message) => message.role)).toEqual([
          "user",
          "assistant",
          "tool",
          "assistant",
        ]);
      },
    );
  });

  it("denied, the code sees ApprovalDenied with the reason, the call never runs, and the model is told", async () => {
    await withAgent([step(TRANSFER), { content: "The transfer was refused." }], async (agent, model) => {
      const first = await agent.run("Send bob 5 euros.");
      const id = first.pending![0]!.id;
      const second = await agent.resume({ [id]: { approved: false, reason: "not this month" } });
      expect(second.stopReason).toBe("answer");
      expect(await transfers()).toEqual([]);
      const observation = toolMessages(model.requests[1]!.messages)[0]!.content;
      expect(observation).toContain('<execution ok="false">');
      expect(observation).toContain("ApprovalDenied");
      expect(observation).toContain("not this month");
    });
  });

  it("asks a question with choices and the code gets the answer", async () => {
    const ask =
      '  const colour = await moss.ask("Which colour?", { choices: ["red", "blue"] });\n  return colour;';
    await withAgent([step(ask), { content: "Blue it is." }], async (agent, model) => {
      const events: AgentEvent[] = [];
      const first = await agent.run("Pick a colour with me.", { onEvent: (event) => events.push(event) });
      expect(first.stopReason).toBe("pending");
      const request = first.pending![0]!;
      expect(request).toMatchObject({
        kind: "clarification",
        question: "Which colour?",
        choices: ["red", "blue"],
      });
      expect(events.filter((event) => event.type === "clarification-request")).toEqual([
        {
          type: "clarification-request",
          step: 1,
          request,
          description: `#${request.id} question at line ${request.line}: Which colour? [red | blue]`,
        },
      ]);
      await expect(agent.resume({ [request.id]: { answer: "green" } })).rejects.toThrow(
        `Request "${request.id}" asks to pick one of "red", "blue"; got "green".`,
      );
      await agent.resume({ [request.id]: { answer: "blue" } });
      const observation = toolMessages(model.requests[1]!.messages)[0]!.content;
      expect(observation).toContain('<returns>\n"blue"\n</returns>');
    });
  });

  it("pauses twice in one step (a question, then an approval) and the model still sees one observation", async () => {
    const code = [
      '  const to = await moss.ask("Who gets the money?");',
      "  const receipt = await moss.vault.transfer(to, 3);",
      "  return receipt;",
    ].join("\n");
    await withAgent([step(code), { content: "Done." }], async (agent, model) => {
      const first = await agent.run("Pay someone 3 euros.");
      expect(first.pending).toMatchObject([{ kind: "clarification", question: "Who gets the money?" }]);
      const second = await agent.resume({ [first.pending![0]!.id]: { answer: "carol" } });
      expect(second.stopReason).toBe("pending");
      expect(second.steps).toBe(0);
      expect(second.pending).toMatchObject([{ kind: "approval", member: "transfer", args: ["carol", 3] }]);
      expect(await transfers()).toEqual([]);
      const third = await agent.resume({ [second.pending![0]!.id]: { approved: true } });
      expect(third.stopReason).toBe("answer");
      expect(await transfers()).toEqual(["carol 3"]);
      expect(model.requests).toHaveLength(2);
      const observations = toolMessages(model.requests[1]!.messages);
      expect(observations).toHaveLength(1);
      expect(observations[0]!.content).toContain('"receipt-1"');
    });
  });

  it("a step with two calls: the second runs after the first is resumed, each with its own observation", async () => {
    const two: ScriptedResponse = {
      toolCalls: [
        { name: "moss", arguments: { code: `async function main(moss: Moss) {\n${TRANSFER}\n}` } },
        {
          name: "moss",
          arguments: { code: "async function main(moss: Moss) {\n  return await moss.vault.balance();\n}" },
        },
      ],
    };
    await withAgent([two, { content: "Sent; 95 left." }], async (agent, model) => {
      const first = await agent.run("Send bob 5 euros, then tell me the balance.");
      expect(first.stopReason).toBe("pending");
      await agent.resume({ [first.pending![0]!.id]: { approved: true } });
      const observations = toolMessages(model.requests[1]!.messages);
      expect(observations.map((message) => message.role === "tool" && message.toolCallId)).toEqual([
        "call_1_1",
        "call_1_2",
      ]);
      expect(observations[0]!.content).toContain("sent receipt-1");
      expect(observations[1]!.content).toContain("<returns>\n95\n</returns>");
    });
  });

  it("resumes after a restart: a new agent with the same session files answers the paused run", async () => {
    await withAgent(
      [step(TRANSFER)],
      async (agent) => {
        expect((await agent.run("Send bob 5 euros.")).stopReason).toBe("pending");
      },
      session(),
    );
    const saved = JSON.parse(await readFile(join(directory, "sessions", "s1.conversation.json"), "utf8"));
    expect(JSON.stringify(saved)).toContain('"continuation"');
    await withAgent(
      [{ content: "Sent." }],
      async (agent, model) => {
        const requests = await agent.pending();
        expect(requests).toMatchObject([{ kind: "approval", member: "transfer" }]);
        const result = await agent.resume({ [requests![0]!.id]: { approved: true } });
        expect(result.stopReason).toBe("answer");
        expect(await transfers()).toEqual(["bob 5"]);
        const sent = model.requests[0]!.messages;
        expect(sent.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool"]);
        expect(sent.at(-1)!.content).toContain("sent receipt-1");
      },
      session(),
    );
  });

  it("a resume locks its session before any code runs: locked by another writer, nothing runs; a new agent resumes while the old one exists", async () => {
    // The old agent stays open (its store never closed), as a server's would while a new agent object resumes.
    const model = new ScriptedLanguageModel([step(TRANSFER)]);
    const old = session();
    const first = new MossAgent({ model, modulePath: MODULE, ...old });
    try {
      expect((await first.run("Send bob 5 euros.")).stopReason).toBe("pending");
      const writer = new FileContextStore(join(directory, "sessions"));
      await writer.acquire("s1");
      await withAgent(
        [{ content: "Sent." }],
        async (agent) => {
          const requests = await agent.pending();
          const answers = { [requests![0]!.id]: { approved: true as const } };
          const locked = await agent.resume(answers).catch((error: unknown) => error);
          expect(MossError.is(locked) && locked.code).toBe("context-locked");
          // The approved transfer did not run: the run could not have saved what it did.
          expect(await transfers()).toEqual([]);
          await writer.release("s1");
          expect((await agent.resume(answers)).stopReason).toBe("answer");
          expect(await transfers()).toEqual(["bob 5"]);
        },
        session(),
      );
    } finally {
      await first.close();
      await (old.store as FileContextStore).close();
    }
  });

  it("resuming with nothing paused, or with answers that do not fit, is a clear error", async () => {
    await withAgent([step(TRANSFER)], async (agent) => {
      const nothing = await agent.resume({}).catch((error: unknown) => error);
      expect(MossError.is(nothing) && nothing.code).toBe("invalid-argument");
      expect((nothing as Error).message).toContain("no paused run to resume");
      const { pending } = await agent.run("Send bob 5 euros.");
      const id = pending![0]!.id;
      await expect(agent.resume({})).rejects.toThrow(`none was given for "${id}"`);
      await expect(agent.resume({ [id]: { answer: "yes" } })).rejects.toThrow("asks to approve a call");
      await expect(agent.resume({ [id]: { approved: true }, other: { approved: true } })).rejects.toThrow(
        'No pending request has the id "other"',
      );
      expect(await agent.pending()).toHaveLength(1);
      expect(await transfers()).toEqual([]);
    });
  });

  it("a refused continuation ends with an error and closes the paused step, so the session goes on", async () => {
    await withAgent(
      [step(TRANSFER)],
      async (agent) => {
        expect((await agent.run("Send bob 5 euros.")).stopReason).toBe("pending");
      },
      session(),
    );
    const file = join(directory, "sessions", "s1.conversation.json");
    const saved = JSON.parse(await readFile(file, "utf8"));
    const paused = saved.messages.find(
      (message: { metadata: { pending?: unknown } }) => message.metadata.pending,
    );
    const continuation: string = paused.metadata.pending.continuation;
    const tampered = `${continuation.slice(0, 20)}${continuation[20] === "A" ? "B" : "A"}${continuation.slice(21)}`;
    paused.metadata.pending.continuation = tampered;
    await writeFile(file, JSON.stringify(saved));
    await withAgent(
      [{ content: "Nothing was sent; I will not retry." }],
      async (agent, model) => {
        const requests = await agent.pending();
        const events: AgentEvent[] = [];
        const result = await agent.resume(
          { [requests![0]!.id]: { approved: true } },
          {
            onEvent: (event) => events.push(event),
          },
        );
        expect(result.stopReason).toBe("error");
        expect(MossError.is(result.error) && result.error.code).toBe("continuation-invalid");
        expect(events.some((event) => event.type === "notice" && event.kind === "pending-abandoned")).toBe(
          true,
        );
        expect(await transfers()).toEqual([]);
        expect(await agent.pending()).toBeUndefined();
        // The session is well-formed: a new task goes on, and the tool call has its (not-resumed) answer.
        const next = await agent.run("What happened?");
        expect(next.stopReason).toBe("answer");
        const sent = model.requests[0]!.messages;
        expect(sent.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool", "user"]);
        expect(sent[3]!.content).toContain('kind="not-resumed"');
      },
      session(),
    );
  });

  it("a new task instead of answers closes the paused step; the model is told it did not run", async () => {
    await withAgent([step(TRANSFER), { content: "Balance is 100." }], async (agent, model) => {
      expect((await agent.run("Send bob 5 euros.")).stopReason).toBe("pending");
      const events: AgentEvent[] = [];
      const next = await agent.run("What is my balance?", { onEvent: (event) => events.push(event) });
      expect(next.stopReason).toBe("answer");
      expect(events.some((event) => event.type === "notice" && event.kind === "pending-abandoned")).toBe(
        true,
      );
      const sent = model.requests[1]!.messages;
      expect(sent.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool", "user"]);
      expect(sent[3]!.content).toContain("a new task was given instead of answers");
      expect(await transfers()).toEqual([]);
      expect(await agent.pending()).toBeUndefined();
    });
  });

  it("the system prompt tells the model about moss.ask and @approval", () => {
    const prompt = buildSystemPrompt("export class Moss {}", { tools: true });
    expect(prompt).toContain("moss.pprint");
    expect(prompt).toContain("`await moss.ask(question, { choices })`");
    expect(prompt).toContain("`@approval` wait for a person's yes");
    expect(prompt).toContain("`ApprovalDenied`");
  });
});
