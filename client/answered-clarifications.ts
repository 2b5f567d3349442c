/** The answer to an approval: `{ requestId, approved: true }` or `{ requestId, approved: false, reason? }`. */
export type ApprovalPayload =
  | { requestId: string; approved: true }
  | { requestId: string; approved: false; reason?: string };
/** The answer to a question the agent's code asked: `{ requestId, answer }`. */
export type QuestionPayload = { requestId: string; answer: string };
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

/** The native API's answer (without the request id) for a payload. */
export function answerOf(payload: ClarificationPayload): Record<string, unknown> {
  if ("answer" in payload) return { answer: payload.answer };
  if (payload.approved) return { approved: true };
  return payload.reason === undefined ? { approved: false } : { approved: false, reason: payload.reason };
}
