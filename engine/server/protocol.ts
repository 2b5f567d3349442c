// The server's protocol, as types only: the thread, the run and their statuses, the events a thread publishes (as
// stored and streamed) and the error body. The server builds these shapes; moss-ts/client reads them with
// `import type` (nothing here exists at run time, so the client bundles none of the engine).
import type { AgentEvent } from "../agent/index.ts";
import type { Execution, HostCallRecord, PendingRequest } from "../types.ts";

/** A conversation of one tenant; its id is chosen by the client or generated. */
export interface Thread {
  id: string;
  metadata: Record<string, unknown>;
  createdAt: string;
}

/** Where a run is: waiting for a worker, running, waiting for a person, or over. */
export type RunStatus = "queued" | "running" | "pending" | "completed" | "failed" | "cancelled";

/** One user message's run of the agent in a thread (resumed in place when its pending requests are answered). */
export interface Run {
  id: string;
  threadId: string;
  status: RunStatus;
  message: string;
  createdAt: string;
  updatedAt: string;
  /** How many times a worker claimed it (more than once after a worker was lost or the run was resumed). */
  attempts: number;
  stopReason?: string;
  answer?: string;
  error?: string;
}

/** What a thread is doing now, for `GET /v1/threads/:id`. */
export interface ThreadState {
  thread: Thread;
  status: "idle" | "running" | "pending";
  /** The active run (queued, running or waiting for a person): the run `pending` belongs to. */
  runId?: string;
  pending: PendingRequest[];
  lastEventId: number;
}

/**
 * One execution of a run's code in its trace: the host calls it made, in call order. A step that paused executes
 * again when its run resumes (its earlier calls then `replayed`), so a step may have several.
 */
export interface TraceExecution {
  /** The agent's step that ran the code. */
  step: number;
  /** The id of the thread's `execution` event it is read from. */
  eventId: number;
  ok: boolean;
  /** The code paused here, waiting for a person (its last call is `pending`). */
  paused: boolean;
  durationMs: number;
  /** Sizes always; arguments, results and errors (bounded, redacted) unless the server keeps sizes only. */
  calls: HostCallRecord[];
}

/** `GET /v1/threads/:threadId/runs/:runId/trace`: the host calls of every execution of a run, by step. */
export interface RunTrace {
  runId: string;
  status: RunStatus;
  executions: TraceExecution[];
  /** The page was cut (it is bounded in bytes): pass this as `?after=` for the executions after it. */
  next?: number;
}

/** The `run-status` event stored whenever a run changes status. */
export type RunStatusEvent = { type: "run-status"; status: RunStatus; run: Run };

/**
 * The `answer` event stored (and streamed) for each answer an accepted `POST /v1/threads/:id/answers` applied: the
 * decision a person made on one request of a paused run, who made it and when (its texts pass the server's redactor).
 */
export type AnswerEvent = {
  type: "answer";
  runId: string;
  /** The request answered (`r<call>-<tag>`). */
  requestId: string;
  kind: "approval" | "clarification";
  /** An approval's decision. */
  approved?: boolean;
  /** The reason given with a denial. */
  reason?: string;
  /** A question's answer. */
  answer?: string;
  /** Who answered: the tenant whose token posted it (`name`: the person, when the server knows one). */
  by: { tenant: string; name?: string };
  /** When the answer was accepted (ISO 8601). */
  at: string;
};

/**
 * The `session` event stored after each execution of a run: the data fields of `moss` as they are after it, each as
 * readable JSON text (redacted, cut to 4,096 characters with a `[truncated N characters]` marker in the middle),
 * and the names of those that changed.
 */
export type SessionEvent = {
  type: "session";
  step: number;
  fields: Record<string, string>;
  changed: string[];
};

/** `GET /v1/threads/:threadId/session`: the thread's data fields as its last `session` event left them. */
export interface ThreadSession {
  fields: Record<string, string>;
  /** When the last `session` event was stored (absent before the thread's first execution). */
  updatedAt?: string;
}

/** `GET /v1/threads/:threadId/prompt`: the prompt the model reads for the thread's module. */
export interface ThreadPrompt {
  /** The module's path as the prompt names it. */
  module: string;
  /** The module prompt: its visible source and the declarations it reaches (hidden regions never appear). */
  prompt: string;
  /** The operator's extra instructions of the agent, when it has some. */
  instructions?: string;
}

/** A failure as a tenant reads it: a stable code (`model-unavailable`, `server-error`, …) and a sentence. */
export interface PublishedFailure {
  code: string;
  message: string;
}

/** An execution as published: without the saved context, and a pause as its requests only (no continuation). */
export type PublishedExecution = Omit<Execution, "context" | "pending"> & {
  pending?: { requests: PendingRequest[] };
};

/**
 * An event as a thread publishes it (the `data:` of the native stream, as stored): an agent event without the
 * server's own state, or a `run-status`, with the run it belongs to. A failure reads as its code and sentence.
 */
export type PublishedEvent = (
  | Exclude<AgentEvent, { type: "error" | "execution" }>
  | (Omit<Extract<AgentEvent, { type: "execution" }>, "execution"> & { execution: PublishedExecution })
  | { type: "error"; error: PublishedFailure; message: string }
  | RunStatusEvent
  | AnswerEvent
  | SessionEvent
) & { runId: string | null };

/** The type of a published event (the native stream's `event:`). */
export type PublishedEventType = PublishedEvent["type"];

/** One event of the native stream: its per-thread id (`id:`), its type (`event:`) and its data (`data:`). */
export type StreamedEvent = {
  [Type in PublishedEventType]: { id: number; type: Type; data: Extract<PublishedEvent, { type: Type }> };
}[PublishedEventType];

/** The body of every refused request: a stable code and a sentence. */
export interface ErrorBody {
  error: { code: string; message: string };
}
