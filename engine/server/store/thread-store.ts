// Threads: created once per tenant and id, listed newest first in pages bounded in count and bytes, read with what
// they do now, and deleted with everything of theirs in one transaction.
import { randomUUID } from "node:crypto";
import { LIST_PAGE_BYTES } from "../answer-bounds.ts";
import type { RunStatus, Thread, ThreadState } from "../protocol.ts";
import { ServerError } from "../server-error.ts";
import { pendingRequests } from "./answer-store.ts";
import type { Database } from "./database.ts";
import { activeRun } from "./run-store.ts";
import {
  CHANNELS,
  type StoreParts,
  sessionIdOf,
  type ThreadRow,
  threadNotFound,
  toThread,
} from "./store-rows.ts";
import { storedText } from "./stored-text.ts";

/** Creates the thread, or returns the tenant's existing one with that id (`created` false). */
export async function createThread(
  database: Database,
  tenant: string,
  id: string | undefined,
  metadata: Record<string, unknown> = {},
): Promise<{ thread: Thread; created: boolean }> {
  const threadId = id ?? randomUUID();
  const inserted = await database.query<ThreadRow>(
    `INSERT INTO moss_threads (tenant, id, metadata) VALUES ($1, $2, $3)
     ON CONFLICT (tenant, id) DO NOTHING RETURNING id, metadata, created_at`,
    [tenant, threadId, JSON.stringify(metadata)],
  );
  if (inserted[0] !== undefined) return { thread: toThread(inserted[0]), created: true };
  const existing = await getThread(database, tenant, threadId);
  if (existing === undefined) throw new Error(`thread ${threadId} vanished while it was created`);
  return { thread: existing, created: false };
}

export async function getThread(
  database: Database,
  tenant: string,
  threadId: string,
): Promise<Thread | undefined> {
  const rows = await database.query<ThreadRow>(
    "SELECT id, metadata, created_at FROM moss_threads WHERE tenant = $1 AND id = $2",
    [tenant, threadId],
  );
  return rows[0] === undefined ? undefined : toThread(rows[0]);
}

/** Replaces the metadata of the tenant's thread (a rename): 404 `thread-not-found` when the tenant has none. */
export async function updateThread(
  database: Database,
  tenant: string,
  threadId: string,
  metadata: Record<string, unknown>,
): Promise<Thread> {
  const rows = await database.query<ThreadRow>(
    "UPDATE moss_threads SET metadata = $3 WHERE tenant = $1 AND id = $2 RETURNING id, metadata, created_at",
    [tenant, threadId, JSON.stringify(metadata)],
  );
  if (rows[0] === undefined) throw threadNotFound(threadId);
  return toThread(rows[0]);
}

/** 400 `before-unknown` when the tenant has no thread `before`: an empty page would read as the end of the list. */
async function checkBefore(database: Database, tenant: string, before: string | undefined): Promise<void> {
  if (before !== undefined && (await getThread(database, tenant, before)) === undefined) {
    throw new ServerError(
      400,
      "before-unknown",
      `?before names no thread of yours ("${before}"): pass the id of the last thread of the previous page.`,
    );
  }
}

/** The tenant's threads, newest first; `before` is the id of the last thread of the previous page. */
export async function listThreads(
  database: Database,
  tenant: string,
  limit: number,
  before?: string,
): Promise<Thread[]> {
  await checkBefore(database, tenant, before);
  const rows = await database.query<ThreadRow>(
    `SELECT id, metadata, created_at FROM moss_threads
     WHERE tenant = $1 AND ($3::text IS NULL OR (created_at, id) <
       (SELECT created_at, id FROM moss_threads WHERE tenant = $1 AND id = $3))
     ORDER BY created_at DESC, id DESC LIMIT $2`,
    [tenant, limit, before ?? null],
  );
  return rows.map(toThread);
}

/**
 * One page of the tenant's threads, newest first (see listThreads), bounded in bytes too: it ends before the
 * thread that would take it past `maxBytes` of stored metadata (it always holds one), and `next` (the id to pass
 * as `before`) says more remain.
 */
export async function listThreadPage(
  database: Database,
  tenant: string,
  limit: number,
  before?: string,
  maxBytes = LIST_PAGE_BYTES,
): Promise<{ threads: Thread[]; next?: string }> {
  await checkBefore(database, tenant, before);
  // One more than the page is read (its size only) to know whether more remain.
  const rows = await database.query<ThreadRow & { fits: boolean }>(
    `SELECT id, CASE WHEN fits THEN metadata END AS metadata, created_at, fits FROM (
       SELECT id, metadata, created_at, size, position,
         (position = 1 OR sum(size) OVER (ORDER BY position ROWS UNBOUNDED PRECEDING) <= $4::bigint)
           AND position <= $2 AS fits
       FROM (SELECT id, metadata, created_at, octet_length(coalesce(metadata::text, '')) + 64 AS size,
               row_number() OVER (ORDER BY created_at DESC, id DESC) AS position
             FROM moss_threads
             WHERE tenant = $1 AND ($3::text IS NULL OR (created_at, id) <
               (SELECT created_at, id FROM moss_threads WHERE tenant = $1 AND id = $3))
             ORDER BY created_at DESC, id DESC LIMIT $2 + 1) AS page
     ) AS sized ORDER BY position LIMIT $2 + 1`,
    [tenant, limit, before ?? null, maxBytes],
  );
  const threads = rows.filter((row) => row.fits).map(toThread);
  return threads.length < rows.length ? { threads, next: threads.at(-1)!.id } : { threads };
}

/** The thread, whether a run is active or waits for a person, its unanswered requests and its last event id. */
export async function threadState(
  store: StoreParts,
  tenant: string,
  threadId: string,
): Promise<ThreadState | undefined> {
  const rows = await store.database.query<ThreadRow & { last_event_id: number }>(
    "SELECT id, metadata, created_at, last_event_id FROM moss_threads WHERE tenant = $1 AND id = $2",
    [tenant, threadId],
  );
  const row = rows[0];
  if (row === undefined) return undefined;
  const active = await activeRun(store.database, tenant, threadId);
  const pending = active?.status === "pending" ? await pendingRequests(store.database, active.id, true) : [];
  return {
    thread: toThread(row),
    status: active === undefined ? "idle" : active.status === "pending" ? "pending" : "running",
    ...(active === undefined ? {} : { runId: active.id }),
    pending: store.view.value(pending),
    lastEventId: row.last_event_id,
  };
}

/**
 * Deletes the tenant's thread with its runs, events, pending requests, answers' idempotency keys, stored context
 * and conversation, in one transaction: 404 when the tenant has no such thread, 409 `thread-busy` while a worker
 * runs one of its runs (cancel it first; a queued or paused run goes with the thread). Resolves the runs deleted.
 */
export async function deleteThread(database: Database, tenant: string, threadId: string): Promise<number> {
  return database.transaction(async (executor) => {
    const thread = await executor.query(
      "SELECT 1 FROM moss_threads WHERE tenant = $1 AND id = $2 FOR UPDATE",
      [tenant, threadId],
    );
    if (thread.length === 0) throw threadNotFound(threadId);
    // Locked, a queued run is skipped by claimers (SKIP LOCKED) until it is gone with the thread.
    const runs = await executor.query<{ id: string; status: RunStatus }>(
      "SELECT id, status FROM moss_runs WHERE tenant = $1 AND thread_id = $2 FOR UPDATE",
      [tenant, threadId],
    );
    const running = runs.find((run) => run.status === "running");
    if (running !== undefined) {
      throw new ServerError(
        409,
        "thread-busy",
        `Thread "${threadId}" has run "${running.id}" running: cancel it first (POST /v1/threads/${threadId}/runs/${running.id}/cancel), then delete the thread once the run is cancelled.`,
      );
    }
    const sessionId = sessionIdOf(tenant, threadId);
    await executor.query("DELETE FROM moss_contexts WHERE session_id = $1", [sessionId]);
    await executor.query("DELETE FROM moss_conversations WHERE session_id = $1", [sessionId]);
    await executor.query(
      "DELETE FROM moss_idempotency_keys WHERE tenant = $1 AND body -> 'run' ->> 'threadId' = $2",
      [tenant, storedText(threadId)],
    );
    // Runs (and through them pending requests) and events go with the thread: their foreign keys cascade.
    await executor.query("DELETE FROM moss_threads WHERE tenant = $1 AND id = $2", [tenant, threadId]);
    // Wakes the thread's open event streams (on every instance): they find the thread gone and end.
    await executor.query("SELECT pg_notify($1, json_build_array($2::text, $3::text, 0)::text)", [
      CHANNELS.events,
      tenant,
      threadId,
    ]);
    return runs.length;
  });
}
