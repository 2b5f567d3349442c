import { describe, expect, it } from "vitest";
import {
  countTokens,
  fitContext,
  INTERRUPTED_OBSERVATION,
  requestTokens,
  type WindowEntry,
  wellFormed,
} from "../../engine/agent/context-window.ts";
import { unclearAnswer } from "../../engine/agent/moss-agent.ts";
import type { ChatMessage } from "../../engine/model/language-model.ts";

const system: ChatMessage = { role: "system", content: "You are an agent." };
const call = (id: string) => ({ id, name: "moss", arguments: '{"code":"x"}' });

describe("wellFormed", () => {
  it("joins consecutive user turns, answers open tool calls, drops orphan tool results and leading answers", () => {
    expect(
      wellFormed([
        { role: "assistant", content: "stray" },
        { role: "user", content: "task" },
        { role: "user", content: "more" },
        { role: "assistant", content: "", toolCalls: [call("a"), call("b")] },
        { role: "tool", content: "ok a", toolCallId: "a" },
        { role: "tool", content: "orphan", toolCallId: "zzz" },
        { role: "user", content: "next task" },
        { role: "assistant", content: "one" },
        { role: "assistant", content: "two" },
      ]),
    ).toEqual([
      { role: "user", content: "task\n\nmore" },
      { role: "assistant", content: "", toolCalls: [call("a"), call("b")] },
      { role: "tool", content: "ok a", toolCallId: "a" },
      { role: "tool", content: INTERRUPTED_OBSERVATION, toolCallId: "b" },
      { role: "user", content: "next task" },
      { role: "assistant", content: "one\n\ntwo" },
    ]);
  });
});

describe("fitContext", () => {
  const big = "lorem ipsum dolor sit amet ".repeat(200);
  const entries: WindowEntry[] = [
    { message: { role: "user", content: "old task" }, kind: "task" },
    { message: { role: "assistant", content: "", toolCalls: [call("1")] }, kind: "turn" },
    { message: { role: "tool", content: big, toolCallId: "1" }, kind: "observation" },
    { message: { role: "assistant", content: "old answer" }, kind: "turn" },
    { message: { role: "user", content: "the task" }, kind: "task" },
    { message: { role: "assistant", content: "", toolCalls: [call("2")] }, kind: "turn" },
    { message: { role: "tool", content: big, toolCallId: "2" }, kind: "observation" },
    { message: { role: "assistant", content: "", toolCalls: [call("3")] }, kind: "turn" },
    { message: { role: "tool", content: `latest ${big}`, toolCallId: "3" }, kind: "observation" },
  ];

  it("sends everything when it fits", () => {
    const { messages, trim } = fitContext(system, entries, 100_000);
    expect(trim).toBeUndefined();
    expect(messages).toHaveLength(entries.length + 1);
  });

  it("shortens old observations first, keeping the system prompt, the task and the latest step", () => {
    const full = requestTokens([system, ...entries.map((entry) => entry.message)]);
    const { messages, trim } = fitContext(system, entries, full - countTokens(big) + 300);
    expect(trim).toMatchObject({ shortenedObservations: 1, droppedMessages: 0, shortenedLatest: false });
    expect(messages[3]!.content).toContain("[shortened to fit the context window; it was");
    expect(messages.at(-1)!.content).toBe(`latest ${big}`);
    expect(trim!.tokensAfter).toBeLessThanOrEqual(trim!.budgetTokens);
  });

  it("then leaves out old steps and tasks, oldest first, never the latest task or step, and stays well-formed", () => {
    const budget = countTokens(`latest ${big}`) + 60;
    const { messages, trim } = fitContext(system, entries, budget);
    expect(trim!.droppedMessages).toBeGreaterThan(0);
    expect(messages[0]).toBe(system);
    expect(messages[1]).toEqual({ role: "user", content: "the task" });
    expect(messages.at(-1)!.content).toBe(`latest ${big}`);
    expect(messages.map((message) => message.role).join(",")).toMatch(/^system,user(,assistant,tool)+$/);
    expect(trim!.shortenedLatest).toBe(false);
    expect(requestTokens(messages)).toBeLessThanOrEqual(budget);
  });

  it("cuts the latest step itself when nothing else is left, and refuses when the task alone does not fit", () => {
    const { messages, trim } = fitContext(system, entries, 400);
    expect(trim!.shortenedLatest).toBe(true);
    expect(requestTokens(messages)).toBeLessThanOrEqual(400);
    expect(() => fitContext(system, entries, 10)).toThrow(/The system prompt and the task take \d+ tokens/);
  });
});

describe("unclearAnswer", () => {
  it("accepts plain final answers", () => {
    for (const answer of [
      "Done: the ball rolled in a square.",
      "I cannot do that: there is no camera.",
      "Let me know if you need anything else.",
      "You have 3 todos.",
    ]) {
      expect(unclearAnswer(answer)).toBeUndefined();
    }
  });

  it("names what is wrong with an answer that neither acts nor finishes", () => {
    expect(unclearAnswer("  ")).toBe("was empty");
    expect(unclearAnswer("```python\nprint(1)\n```")).toContain("`python` code block");
    expect(unclearAnswer("I'll roll the ball now.")).toContain("announced a next step");
    expect(unclearAnswer("Here is the plan:")).toContain("announced a next step");
  });
});

describe("images in the window", () => {
  const image = { mediaType: "image/png", data: "aGk=" };
  it("joining consecutive user turns keeps the images of both", () => {
    expect(
      wellFormed([
        { role: "user", content: "a", images: [image] },
        { role: "user", content: "b", images: [{ ...image, detail: "low" }] },
      ]),
    ).toEqual([{ role: "user", content: "a\n\nb", images: [image, { ...image, detail: "low" }] }]);
  });

  it("an image costs its tokens in the budget (less at low detail)", () => {
    const plain = requestTokens([{ role: "user", content: "look" }]);
    const high = requestTokens([{ role: "user", content: "look", images: [image] }]);
    const low = requestTokens([{ role: "user", content: "look", images: [{ ...image, detail: "low" }] }]);
    expect(high - plain).toBe(765);
    expect(low - plain).toBe(85);
  });
});
