// MossAgent.pendFromCheckpoint (issue 18): the one public way a server turns the checkpoint of a step whose worker
// died into the agent's paused step, so `resume({})` continues it. Until then RunWorker wrote the agent's private
// pending-step record itself. The replay end to end (no host call repeated) is test/server/worker-takeover.test.ts.
import { describe, expect, it } from "vitest";
import { MossAgent } from "../../engine/agent/moss-agent.ts";
import { ScriptedLanguageModel } from "../../engine/agent/scripted-language-model.ts";
import { Conversation } from "../../engine/model/conversation.ts";
import { MemoryConversationStore } from "../../engine/model/conversation-store.ts";

/** A checkpoint's readable shape (`v1.<payload>.<signature>`); the runtime that resumes it checks the signature. */
function checkpointOf(code: string): string {
  return `v1.${Buffer.from(JSON.stringify({ code })).toString("base64url")}.signature`;
}

const TRANSFER = "await moss.vault.transfer('bob', 5);";

/** A conversation whose head is a model answer of one `moss` tool call per entry of `codes` (ids call-1, …). */
function conversationAt(codes: string[]): Conversation {
  const conversation = new Conversation();
  conversation.append("user", "Send bob 5 euros.");
  conversation.append("assistant", "", {
    step: 2,
    toolCalls: codes.map((code, index) => ({
      id: `call-${index + 1}`,
      name: "moss",
      arguments: JSON.stringify({ code }),
    })),
  });
  return conversation;
}

describe("MossAgent.pendFromCheckpoint", () => {
  it("makes the checkpoint the paused step of a one-action answer: a new agent of the session waits for no answer", async () => {
    const conversation = conversationAt([TRANSFER]);
    const head = conversation.head!;
    const checkpoint = checkpointOf(TRANSFER);
    expect(MossAgent.pendFromCheckpoint(conversation, checkpoint)).toBe(true);
    expect(conversation.head!.metadata.pending).toMatchObject({
      continuation: checkpoint,
      requests: [],
      assistantId: head.id,
      step: 2,
      actionIndex: 0,
      code: TRANSFER,
      toolCallId: "call-1",
    });
    const store = new MemoryConversationStore();
    await store.save("session", conversation);
    const agent = new MossAgent({
      model: new ScriptedLanguageModel([]),
      modulePath: "test/agent/fixtures/vault/context.ts",
      sessionId: "session",
      conversationStore: store,
    });
    expect(await agent.pending()).toEqual([]);
  });

  it("continues a step of several actions at the one that was running: the completed ones keep their observations", () => {
    const conversation = conversationAt(["1;", TRANSFER]);
    const assistant = conversation.head!;
    // The first action completed: its observation is stored; the second was running.
    conversation.append("tool", "ok", { kind: "observation", ok: true, toolCallId: "call-1" });
    // A checkpoint of the completed first action is not the running one's: refused.
    expect(MossAgent.pendFromCheckpoint(conversation, checkpointOf("1;"))).toBe(false);
    expect(conversation.head!.metadata.pending).toBeUndefined();
    expect(MossAgent.pendFromCheckpoint(conversation, checkpointOf(TRANSFER))).toBe(true);
    expect(conversation.head!.metadata.pending).toMatchObject({
      assistantId: assistant.id,
      actionIndex: 1,
      code: TRANSFER,
      toolCallId: "call-2",
      failedBefore: false,
    });
  });

  it("refuses (and changes nothing) where a resume could not continue the step", () => {
    const checkpoint = checkpointOf("1;");
    // The checkpoint is not of the running action's code.
    const other = conversationAt([TRANSFER]);
    expect(MossAgent.pendFromCheckpoint(other, checkpoint)).toBe(false);
    expect(other.head!.metadata.pending).toBeUndefined();
    // The head is the task, not a model answer.
    const task = new Conversation();
    task.append("user", "Send bob 5 euros.");
    expect(MossAgent.pendFromCheckpoint(task, checkpoint)).toBe(false);
    expect(task.head!.metadata.pending).toBeUndefined();
    // Not a continuation.
    const one = conversationAt(["1;"]);
    expect(MossAgent.pendFromCheckpoint(one, "not a checkpoint")).toBe(false);
    expect(one.head!.metadata.pending).toBeUndefined();
    // Already paused: the paused step is kept.
    const paused = conversationAt(["1;"]);
    expect(MossAgent.pendFromCheckpoint(paused, checkpoint)).toBe(true);
    const first = paused.head!.metadata.pending;
    expect(MossAgent.pendFromCheckpoint(paused, checkpointOf("2;"))).toBe(false);
    expect(paused.head!.metadata.pending).toBe(first);
  });
});
