import { MossError } from "./errors.ts";
import type { Answer, Answers, PendingRequest } from "./types.ts";

/**
 * The one parser of a person's answers to a paused run, used by `MossRuntime.resume`, `MossAgent.resume`, the CLI
 * and the server.
 *
 * Decision: **a partial set of answers is refused.** A paused run resumes only with one answer for every request
 * it waits for (the requests of one turn come together), each of the right kind, and nothing else. A typo or a
 * forgotten request is an error naming it rather than a replay that pauses again at the same place; a caller that
 * collects answers one at a time (a chat UI, the server) keeps them until {@link missingAnswers} is empty.
 */

/** Why `value` is not one answer (`{ approved: boolean, reason?: string }` or `{ answer: string }`), or undefined. */
export function answerShapeProblem(value: unknown): string | undefined {
  const expected = '{"approved": true}, {"approved": false, "reason": "…"} or {"answer": "…"}';
  if (value === null || typeof value !== "object" || Array.isArray(value)) return `expected ${expected}`;
  const fields = value as Record<string, unknown>;
  if (Object.hasOwn(fields, "answer")) {
    return typeof fields.answer === "string" ? undefined : "the answer must be a string";
  }
  if (typeof fields.approved !== "boolean") return `expected ${expected}`;
  if (fields.reason !== undefined && typeof fields.reason !== "string") return "the reason must be a string";
  return undefined;
}

/**
 * The `r<call>` part of a request id (`r2` of `r2-3fa9c1b2d4e5`): the call's number in its run, which a person may
 * write for the one run an answers file goes with (`moss run --answers`). It names a request only within one run:
 * the server and `resume()` take full ids only.
 */
export function callPartOf(id: string): string {
  const dash = id.indexOf("-");
  return dash < 0 ? id : id.slice(0, dash);
}

/** Whether `value` has the shape of one answer. */
export function isAnswer(value: unknown): value is Answer {
  return answerShapeProblem(value) === undefined;
}

/** The requests `answers` does not answer yet (all of them when `answers` is not an object). */
export function missingAnswers(requests: readonly PendingRequest[], answers: unknown): PendingRequest[] {
  const given = answers !== null && typeof answers === "object" ? (answers as Record<string, unknown>) : {};
  return requests.filter((request) => !Object.hasOwn(given, request.id) || given[request.id] === undefined);
}

/**
 * Checks that `answers` answer every pending request, each with the right kind of answer (one of the choices when
 * a question offers some), and nothing else; throws a MossError (`invalid-argument`) naming the request otherwise.
 */
export function checkAnswers(
  requests: readonly PendingRequest[],
  answers: unknown,
): asserts answers is Answers {
  if (answers === null || typeof answers !== "object" || Array.isArray(answers)) {
    throw new MossError(
      "invalid-argument",
      "resume() needs the answers as an object keyed by request id.",
      {},
    );
  }
  const ids = requests.map((request) => request.id);
  const quoted = (list: readonly string[]) => list.map((id) => `"${id}"`).join(", ");
  const unknown = Object.keys(answers).filter((id) => !ids.includes(id));
  if (unknown.length > 0) {
    throw new MossError(
      "invalid-argument",
      `No pending request has the id ${quoted(unknown)}; the run waits for ${quoted(ids) || "nothing"}.`,
      { unknown, pending: ids },
    );
  }
  const missing = missingAnswers(requests, answers).map((request) => request.id);
  if (missing.length > 0) {
    throw new MossError(
      "invalid-argument",
      `Every pending request needs an answer; none was given for ${quoted(missing)}.`,
      { missing, pending: ids },
    );
  }
  const given = answers as Record<string, unknown>;
  for (const request of requests) {
    const problem = requestAnswerProblem(request, given[request.id]);
    if (problem !== undefined) {
      throw new MossError("invalid-argument", `Request "${request.id}" ${problem}.`, {
        id: request.id,
        answer: given[request.id],
      });
    }
  }
}

/**
 * Why `answer` does not answer `request` (an approval needs `approved`, a question `answer`, one of its choices when
 * it offers some), or undefined when it does.
 */
export function requestAnswerProblem(request: PendingRequest, answer: unknown): string | undefined {
  const fields = isAnswer(answer) ? (answer as Record<string, unknown>) : undefined;
  const fits = request.kind === "approval" ? fields?.approved !== undefined : fields?.answer !== undefined;
  if (!fits) {
    return request.kind === "approval"
      ? "asks to approve a call: answer it with { approved: true } or { approved: false, reason?: string }"
      : "asks a question: answer it with { answer: string }";
  }
  if (request.kind === "clarification" && request.choices !== undefined) {
    const text = fields!.answer as string;
    if (!request.choices.includes(text)) {
      return `asks to pick one of ${request.choices.map((choice) => JSON.stringify(choice)).join(", ")}; got ${JSON.stringify(text)}`;
    }
  }
  return undefined;
}
