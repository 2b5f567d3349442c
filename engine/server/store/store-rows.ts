// The rows of the store's tables as the protocol's shapes, and the 404s every job of the store answers alike.
import type { Answers, ImageContent } from "../../types.ts";
import type { Run, RunStatus, Thread } from "../protocol.ts";
import { ServerError } from "../server-error.ts";
import type { TenantView } from "../tenant-view.ts";
import type { Database } from "./database.ts";
import { readStoredText } from "./stored-text.ts";

/** What every job of the store works with: the database, and the one redactor of what tenants read. */
export interface StoreParts {
  readonly database: Database;
  readonly view: TenantView;
}

/** The NOTIFY channels: new or resumed runs, stored events, cancel requests. */
export const CHANNELS = Object.freeze({
  runs: "moss_runs",
  events: "moss_events",
  cancel: "moss_cancel",
});

/** The statuses of a run that still holds its thread (queued, running, waiting for a person), as SQL. */
export const ACTIVE = "('queued', 'running', 'pending')";

/** The session id of a thread's MossContext and conversation (tenants never share one). */
export function sessionIdOf(tenant: string, threadId: string): string {
  return `${tenant}/${threadId}`;
}

export interface RunRow {
  id: string;
  tenant: string;
  thread_id: string;
  status: RunStatus;
  message: string;
  answers: Answers | null;
  checkpoint?: string | null;
  images?: ImageContent[] | null;
  attempts: number;
  takeovers?: number;
  stop_reason: string | null;
  answer: string | null;
  error: string | null;
  created_at: Date | string;
  updated_at: Date | string;
}

export function toRun(row: RunRow): Run {
  return {
    id: row.id,
    threadId: row.thread_id,
    status: row.status,
    message: readStoredText(row.message),
    createdAt: isoTime(row.created_at),
    updatedAt: isoTime(row.updated_at),
    attempts: row.attempts,
    ...(row.stop_reason === null ? {} : { stopReason: row.stop_reason }),
    ...(row.answer === null ? {} : { answer: readStoredText(row.answer) }),
    ...(row.error === null ? {} : { error: readStoredText(row.error) }),
  };
}

export interface ThreadRow {
  id: string;
  metadata: Record<string, unknown>;
  created_at: Date | string;
}

export function toThread(row: ThreadRow): Thread {
  return { id: row.id, metadata: row.metadata, createdAt: isoTime(row.created_at) };
}

function isoTime(value: Date | string): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

export function threadNotFound(threadId: string): ServerError {
  return new ServerError(404, "thread-not-found", `No thread "${threadId}".`);
}

export function runNotFound(runId: string): ServerError {
  return new ServerError(404, "run-not-found", `No run "${runId}".`);
}
