import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MossError } from "../../engine/errors.ts";
import { Conversation } from "../../engine/model/conversation.ts";
import { FileConversationStore } from "../../engine/model/conversation-store.ts";

const directories: string[] = [];
afterEach(async () => {
  for (const directory of directories.splice(0)) await rm(directory, { recursive: true, force: true });
});

function contents(messages: { content: string }[]): string[] {
  return messages.map((message) => message.content);
}

describe("Conversation", () => {
  it("appends after the head and threads root → head", () => {
    const conversation = new Conversation();
    const task = conversation.append("user", "task");
    const answer = conversation.append("assistant", "code", { step: 1 });
    expect(answer.parentId).toBe(task.id);
    expect(task.parentId).toBeUndefined();
    expect(conversation.head).toBe(answer);
    expect(contents(conversation.thread())).toEqual(["task", "code"]);
    expect(conversation.get(answer.id).metadata).toEqual({ step: 1 });
  });

  it("attaches branches at any message; thread follows the branch, leftmost follows first children", () => {
    const conversation = new Conversation();
    const task = conversation.append("user", "task");
    const first = conversation.append("assistant", "first try");
    conversation.append("tool", "failed");
    const second = conversation.attach(task.id, "assistant", "second try");
    conversation.append("tool", "worked");
    expect(contents(conversation.children(task.id))).toEqual(["first try", "second try"]);
    expect(contents(conversation.thread())).toEqual(["task", "second try", "worked"]);
    expect(contents(conversation.thread(first.id))).toEqual(["task", "first try"]);
    expect(contents(conversation.leftmostThread())).toEqual(["task", "first try", "failed"]);
    expect(second.parentId).toBe(task.id);
  });

  it("checkout moves the head so the next append branches there", () => {
    const conversation = new Conversation();
    const task = conversation.append("user", "task");
    conversation.append("assistant", "a");
    conversation.checkout(task.id);
    conversation.append("assistant", "b");
    expect(contents(conversation.children(task.id))).toEqual(["a", "b"]);
    expect(() => conversation.checkout("missing")).toThrowError(/no message with id "missing"/);
  });

  it("round-trips through JSON with branches, metadata and head", () => {
    const conversation = new Conversation();
    const task = conversation.append("user", "task", { context: { properties: { n: 1 } } });
    conversation.append("assistant", "a", { toolCalls: [{ id: "c", name: "moss", arguments: "{}" }] });
    conversation.attach(task.id, "assistant", "b");
    const copy = Conversation.fromJSON(JSON.parse(JSON.stringify(conversation)));
    expect(copy.toJSON()).toEqual(conversation.toJSON());
    expect(contents(copy.thread())).toEqual(["task", "b"]);
    expect(contents(copy.leftmostThread())).toEqual(["task", "a"]);
    expect(copy.get(task.id).metadata).toEqual({ context: { properties: { n: 1 } } });
  });

  it("rejects malformed documents with a MossError", () => {
    for (const bad of [null, {}, { version: 2, messages: [] }, { version: 1, messages: [{ id: "x" }] }]) {
      const error = (() => {
        try {
          Conversation.fromJSON(bad);
        } catch (caught) {
          return caught;
        }
      })();
      expect(MossError.is(error, "context-invalid")).toBe(true);
    }
    const orphan = {
      version: 1,
      messages: [{ id: "a", parentId: "zz", role: "user", content: "", metadata: {} }],
    };
    expect(() => Conversation.fromJSON(orphan)).toThrowError(/message #1/);
  });
});

describe("FileConversationStore", () => {
  it("saves and loads a session's conversation as a sibling JSON file; absent sessions load undefined", async () => {
    const directory = await mkdtemp(join(tmpdir(), "moss-conversation-"));
    directories.push(directory);
    const store = new FileConversationStore(directory);
    expect(await store.load("s1")).toBeUndefined();
    const conversation = new Conversation();
    conversation.append("user", "hello");
    await store.save("s1", conversation);
    const text = await readFile(join(directory, "s1.conversation.json"), "utf8");
    expect(JSON.parse(text).messages[0].content).toBe("hello");
    expect(contents((await store.load("s1"))!.thread())).toEqual(["hello"]);
  });

  it("names the file of a corrupt conversation and refuses unsafe session ids", async () => {
    const directory = await mkdtemp(join(tmpdir(), "moss-conversation-"));
    directories.push(directory);
    const store = new FileConversationStore(directory);
    await writeFile(join(directory, "bad.conversation.json"), "{ not json", "utf8");
    await expect(store.load("bad")).rejects.toThrowError(/bad\.conversation\.json/);
    await expect(store.load("../escape")).rejects.toThrowError(/Invalid session id/);
  });
});
