import { describe, expect, test } from "vitest";
import { answerShapeProblem, checkAnswers, isAnswer, missingAnswers } from "../../engine/answers.ts";
import { MossError } from "../../engine/errors.ts";
import type { PendingRequest } from "../../engine/types.ts";

const REQUESTS: PendingRequest[] = [
  { kind: "approval", id: "r1", member: "transfer", service: "bank", args: [5], reason: "tag" },
  { kind: "clarification", id: "r2", question: "Which colour?", choices: ["red", "blue"] },
  { kind: "clarification", id: "r3", question: "Any note?" },
];
const COMPLETE = { r1: { approved: true }, r2: { answer: "red" }, r3: { answer: "none" } };

function refusal(answers: unknown): MossError {
  try {
    checkAnswers(REQUESTS, answers);
  } catch (error) {
    if (MossError.is(error)) return error;
    throw error;
  }
  throw new Error("the answers were accepted");
}

describe("one answers parser (runtime, agent, CLI, server)", () => {
  test("a complete set that fits every request is accepted", () => {
    expect(() => checkAnswers(REQUESTS, COMPLETE)).not.toThrow();
    expect(() =>
      checkAnswers(REQUESTS, { ...COMPLETE, r1: { approved: false, reason: "too much" } }),
    ).not.toThrow();
  });

  test("a partial set is refused, naming every request left out", () => {
    const error = refusal({ r1: { approved: true } });
    expect(error.code).toBe("invalid-argument");
    expect(error.message).toBe('Every pending request needs an answer; none was given for "r2", "r3".');
    expect(error.details).toMatchObject({ missing: ["r2", "r3"], pending: ["r1", "r2", "r3"] });
    expect(missingAnswers(REQUESTS, { r1: { approved: true } }).map((request) => request.id)).toEqual([
      "r2",
      "r3",
    ]);
    expect(missingAnswers(REQUESTS, COMPLETE)).toEqual([]);
  });

  test("unknown ids, wrong kinds, answers outside the choices and non-objects are refused, each named", () => {
    expect(refusal({ ...COMPLETE, r9: { approved: true } }).message).toBe(
      'No pending request has the id "r9"; the run waits for "r1", "r2", "r3".',
    );
    expect(refusal({ ...COMPLETE, r1: { answer: "yes" } }).message).toContain(
      'Request "r1" asks to approve a call',
    );
    expect(refusal({ ...COMPLETE, r3: { approved: true } }).message).toContain(
      'Request "r3" asks a question',
    );
    expect(refusal({ ...COMPLETE, r2: { answer: "green" } }).message).toBe(
      'Request "r2" asks to pick one of "red", "blue"; got "green".',
    );
    for (const bad of [null, "yes", [], 7]) expect(refusal(bad).code).toBe("invalid-argument");
    for (const bad of [null, { approved: "yes" }, { approved: true, reason: 4 }, { answer: 3 }]) {
      expect(refusal({ ...COMPLETE, r1: bad }).code).toBe("invalid-argument");
    }
    // An inherited key is not an answer.
    expect(refusal(Object.create({ r1: { approved: true } })).message).toContain("none was given");
  });

  test("the shape of one answer, for readers that do not know the requests yet (the CLI's --answers file)", () => {
    expect(isAnswer({ approved: true })).toBe(true);
    expect(isAnswer({ approved: false, reason: "no" })).toBe(true);
    expect(isAnswer({ answer: "blue" })).toBe(true);
    expect(answerShapeProblem({ answer: 3 })).toBe("the answer must be a string");
    expect(answerShapeProblem({ approved: true, reason: 3 })).toBe("the reason must be a string");
    expect(answerShapeProblem("yes")).toContain('{"approved": true}');
  });
});
