import { Readable } from "node:stream";
import { describe, expect, test } from "vitest";
import {
  answerRequests,
  answersTemplate,
  describeCall,
  MAX_SHOWN_ARGUMENTS_CHARS,
  readAnswersFile,
} from "../../engine/cli/answer-requests.ts";
import type { ApprovalRequest, ClarificationRequest } from "../../engine/types.ts";

const DELETE: ApprovalRequest = {
  id: "r2",
  kind: "approval",
  service: "shop",
  member: "deleteProduct",
  args: [5, { reason: "old" }],
  reason: "tag",
  line: 4,
};
const COLOUR: ClarificationRequest = {
  id: "r3",
  kind: "clarification",
  question: "Which colour?",
  choices: ["red", "blue"],
};

describe("answers name the request the person saw", () => {
  test("an answer naming the same call and arguments (or nothing) answers it; another call is a mismatch", async () => {
    const named = await answerRequests([DELETE], {
      file: { r2: { approved: true, member: "shop.deleteProduct", args: [5, { reason: "old" }] } },
    });
    expect(named).toEqual({ answers: { r2: { approved: true } }, unanswered: [], mismatched: [] });

    const bare = await answerRequests([DELETE], { file: { r2: { approved: false, reason: "no" } } });
    expect(bare.answers).toEqual({ r2: { approved: false, reason: "no" } });

    for (const other of [
      { approved: true as const, member: "shop.deleteProduct", args: [6, { reason: "old" }] },
      { approved: true as const, member: "shop.deleteProduct", args: [5] },
      { approved: true as const, member: "shop.placeOrder", args: [5, { reason: "old" }] },
    ]) {
      const result = await answerRequests([DELETE], { file: { r2: other } });
      expect(result.answers).toEqual({});
      expect(result.mismatched).toHaveLength(1);
      expect(result.mismatched[0]!.reason).toContain(
        "#r2 now asks to approve shop.deleteProduct(5, { reason: 'old' })",
      );
    }
  });

  test("a question answer naming another question is a mismatch; --approve never answers a question", async () => {
    const wrong = await answerRequests([COLOUR], {
      file: { r3: { answer: "red", question: "Which size?" } },
    });
    expect(wrong.mismatched[0]!.reason).toBe(
      'the answer was given for the question "Which size?", but #r3 now asks the question "Which colour?"',
    );
    const right = await answerRequests([COLOUR], {
      file: { r3: { answer: "blue", question: "Which colour?" } },
    });
    expect(right.answers).toEqual({ r3: { answer: "blue" } });
    const flag = await answerRequests([DELETE, COLOUR], { approve: "all" });
    expect(flag.answers).toEqual({ r2: { approved: true } });
    expect(flag.unanswered).toEqual([COLOUR]);
  });

  test("the template names each request, and reading it back answers exactly those requests", async () => {
    const template = answersTemplate([DELETE, COLOUR]);
    expect(template).toEqual({
      r2: { approved: true, member: "shop.deleteProduct", args: [5, { reason: "old" }] },
      r3: { answer: "red", question: "Which colour?" },
    });
    const read = await readAnswersFile("-", process.cwd(), Readable.from([JSON.stringify(template)]));
    const result = await answerRequests([DELETE, COLOUR], { file: read });
    expect(result.mismatched).toEqual([]);
    expect(result.answers).toEqual({ r2: { approved: true }, r3: { answer: "red" } });
    await expect(
      readAnswersFile("-", process.cwd(), Readable.from(['{"r2": {"approved": true, "args": 5}}'])),
    ).rejects.toThrow(/optionally naming the request/);
  });

  test("the call shown to the person is bounded and escaped", () => {
    const long = describeCall({ ...DELETE, args: ["x".repeat(10_000)] });
    expect(long.length).toBeLessThan(MAX_SHOWN_ARGUMENTS_CHARS + 40);
    expect(long).toMatch(/^shop\.deleteProduct\("x+…\)$/);
    expect(describeCall({ ...DELETE, args: ["\x1b]52;c;aGk=\x07"] })).toBe(
      'shop.deleteProduct("\\u001b]52;c;aGk=\\u0007")',
    );
  });
});
