/*
 * The agent's defaults and stop reasons, a leaf rule of the foundation: the agent reads them, and so do the CLI's
 * settings table, help and exit codes, without loading the agent (and with it the runtime, the compiler and the
 * model client).
 */

/** The model used when neither the options nor `MOSS_MODEL` name one. */
export const DEFAULT_MODEL = "gpt-4o-mini";

/** The context size assumed when neither the options nor the model server say. */
export const DEFAULT_CONTEXT_TOKENS = 8_192;

/** Output tokens per model call when the options do not say. */
export const DEFAULT_MAX_TOKENS = 2_048;

/** Model calls per run before it stops with `max-steps`, when the options do not say. */
export const DEFAULT_MAX_STEPS = 10;

/** Failed steps in a row before a run stops with `max-consecutive-errors`, when the options do not say. */
export const DEFAULT_MAX_ERRORS = 3;

/**
 * Why a run ended: `answer` (the model answered in plain text), `max-steps`, `max-consecutive-errors`,
 * `truncated` (answers kept being cut off at the output limit), `unclear-answer` (the model answered without
 * code and without a clear final answer, also after being told so once), `pending` (the code waits for a
 * person: a call to approve or a question to answer; `MossAgent.resume(answers)` goes on), `error` (the model
 * server or the runtime failed), `aborted` (the caller's signal).
 */
export type StopReason =
  | "answer"
  | "max-steps"
  | "max-consecutive-errors"
  | "truncated"
  | "unclear-answer"
  | "pending"
  | "error"
  | "aborted";

/** Every stop reason with one sentence saying what it means (the CLI's help and summary line use these). */
export const STOP_REASONS: Readonly<Record<StopReason, string>> = Object.freeze({
  answer: "the model answered in plain text (no code): the task is done or cannot be done",
  "max-steps": "the step limit (--max-steps) was reached before the model answered",
  "max-consecutive-errors": "too many steps in a row failed (--max-errors)",
  truncated: "the model's answers kept being cut off at the output limit (--max-tokens)",
  "unclear-answer":
    "the model answered without code and without a clear final answer, also after being told so",
  pending:
    "the code waits for a person: a call to approve or a question to answer (resume the session with the answers)",
  error: "the model server or the runtime failed (the error is printed)",
  aborted: "the run was aborted",
});
