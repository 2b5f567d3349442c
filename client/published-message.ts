import type { MomentType } from "./event-config.ts";

interface MessageBase {
  /** Unique in the thread and the same when the thread's events are replayed. */
  id: string;
  /** Verbose format only: the run the message belongs to. */
  runId?: string;
  /** Verbose format only: the id of the server event the message was made from. */
  eventId?: number;
}

/** Assistant prose; with moments Start and Delta the same `id` is published again as the text grows. */
export interface TextMessage extends MessageBase {
  type: "text";
  /** The whole text (moment `end`), empty at `start`, the new piece at `delta`. */
  content: string;
  moment: MomentType;
}
/** The code the model wrote. */
export interface CodeMessage extends MessageBase {
  type: "code";
  code: string;
}
/** What running the code printed, and its error when it failed (or why it paused). */
export interface ExecutionMessage extends MessageBase {
  type: "execution";
  ok: boolean;
  stdout: string;
  error?: string;
}
/** A question the run waits on: an approval of a host call, or the code's `moss.ask`. */
export interface ClarificationMessage extends MessageBase {
  type: "clarification";
  /** The run that waits: an answer to this request is recorded with it (`{ runId, requestId, … }`). */
  runId: string;
  /** The request's id (`r<call>-<tag>`): one request of one run. */
  requestId: string;
  kind: "approval" | "question";
  question: string;
  /** `["Approve", "Deny"]` for an approval; the code's choices for a question (empty: free text). */
  choices: string[];
  service?: string;
  member?: string;
  args?: unknown[];
}
/** The agent's final answer. */
export interface AnswerMessage extends MessageBase {
  type: "answer";
  content: string;
}
/** Something went wrong: the request was refused, the connection was lost, or the run failed. */
export interface ErrorMessage extends MessageBase {
  type: "error";
  message: string;
  /** The server's stable error code or the run's stop reason, when there is one. */
  code?: string;
}

/** A message published to the app's {@link PluginPort}. */
export type PublishedMessage =
  | TextMessage
  | CodeMessage
  | ExecutionMessage
  | ClarificationMessage
  | AnswerMessage
  | ErrorMessage;

/** The choices of every approval. */
export const APPROVAL_CHOICES: readonly string[] = Object.freeze(["Approve", "Deny"]);
