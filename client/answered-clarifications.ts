/**
 * The request an answer was given for: the run (the clarification message's `runId`) and the request's id. An
 * answer recorded without `runId` is bound to the run of the clarification the handler published with that id.
 */
export type AnsweredRequest = { runId?: string; requestId: string };
/** The answer to an approval: `{ runId, requestId, approved: true }` or `{ runId, requestId, approved: false, reason? }`. */
export type ApprovalPayload = AnsweredRequest & ({ approved: true } | { approved: false; reason?: string });
/** The answer to a question the agent's code asked: `{ runId, requestId, answer }`. */
export type QuestionPayload = AnsweredRequest & { answer: string };
/** What the app answered to one clarification. */
export type ClarificationPayload = ApprovalPayload | QuestionPayload;

/** The clarifications the user answered, keyed by the text of the user message that carries each answer. */
export class AnsweredClarifications {
  readonly #entries = new Map<string, ClarificationPayload>();

  /** Records `payload` as the answer sent when the last user message's content is exactly `key`. */
  add(key: string, payload: ClarificationPayload): this {
    if (typeof key !== "string" || key === "") {
      throw new TypeError("AnsweredClarifications.add needs the message text as a non-empty string key.");
    }
    if (typeof payload?.requestId !== "string" || payload.requestId === "") {
      throw new TypeError(
        `The payload of "${key}" needs "requestId": the id of the clarification it answers.`,
      );
    }
    if (payload.runId !== undefined && (typeof payload.runId !== "string" || payload.runId === "")) {
      throw new TypeError(
        `The payload of "${key}" has "runId" but not as a non-empty string: the run of the clarification it answers.`,
      );
    }
    const approval = "approved" in payload && typeof payload.approved === "boolean";
    const answer = "answer" in payload && typeof payload.answer === "string";
    if (approval === answer) {
      throw new TypeError(
        `The payload of "${key}" needs exactly one of "approved" (a boolean) or "answer" (a string).`,
      );
    }
    this.#entries.set(key, payload);
    return this;
  }

  /** The payload recorded under `key`, if any. */
  get(key: string): ClarificationPayload | undefined {
    return this.#entries.get(key);
  }

  /** Forgets the answer under `key` (once it was sent); true when there was one. */
  delete(key: string): boolean {
    return this.#entries.delete(key);
  }

  /** Every recorded answer. */
  entries(): IterableIterator<[string, ClarificationPayload]> {
    return this.#entries.entries();
  }

  get size(): number {
    return this.#entries.size;
  }
}

/**
 * Whether a recorded answer was given for `request` (a request of run `runId` with id `id`): the one rule of which
 * answer goes with which request. An answer belongs to the request, run and id, it was given for, and is never sent
 * for another: not for a request of a later run that happens to share its id, not without knowing its run.
 */
export function answersRequest(given: AnsweredRequest, request: { runId: string; id: string }): boolean {
  return given.runId !== undefined && given.runId === request.runId && given.requestId === request.id;
}

/** The native API's answer (without the request id) for a payload. */
export function answerOf(payload: ClarificationPayload): Record<string, unknown> {
  if ("answer" in payload) return { answer: payload.answer };
  if (payload.approved) return { approved: true };
  return payload.reason === undefined ? { approved: false } : { approved: false, reason: payload.reason };
}
