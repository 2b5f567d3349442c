// Runs as tenants ask for them: queued one at a time per thread within the tenant's share, read, and cancelled
// from any instance (a running run is flagged for its worker).
import { randomUUID } from "node:crypto";
import type { ImageContent } from "../../types.ts";
import type { Run } from "../protocol.ts";
import { ServerError } from "../server-error.ts";
import type { SqlExecutor } from "./database.ts";
import { appendEvents, runStatusEvent } from "./event-log.ts";
import {
  ACTIVE,
  CHANNELS,
  type RunRow,
  runNotFound,
  type StoreParts,
  threadNotFound,
  toRun,
} from "./store-rows.ts";
import { storedText } from "./stored-text.ts";

/**
 * Queues a run of `message` in the thread: 404 when the thread is not the tenant's, 409 `thread-busy` while
 * another run of it is active, 429 `too-many-runs` when the tenant already has `maxActiveRuns` active runs.
 */
export async function createRun(
  store: StoreParts,
  tenant: string,
  threadId: string,
  message: string,
  options: { images?: ImageContent[]; maxActiveRuns: number },
): Promise<Run> {
  return store.database.transaction(async (executor) => {
    // One run creation per tenant at a time (held to the commit), so its active-run count stays exact.
    await executor.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`moss-tenant-runs\n${tenant}`]);
    const thread = await executor.query(
      "SELECT 1 FROM moss_threads WHERE tenant = $1 AND id = $2 FOR UPDATE",
      [tenant, threadId],
    );
    if (thread.length === 0) throw threadNotFound(threadId);
    const active = await activeRun(executor, tenant, threadId);
    if (active !== undefined) {
      throw new ServerError(
        409,
        "thread-busy",
        `Thread "${threadId}" already has run "${active.id}" (${active.status}): answer or cancel it first.`,
      );
    }
    const [count] = await executor.query<{ count: number }>(
      `SELECT count(*)::integer AS count FROM moss_runs WHERE tenant = $1 AND status IN ${ACTIVE}`,
      [tenant],
    );
    if ((count?.count ?? 0) >= options.maxActiveRuns) {
      throw new ServerError(
        429,
        "too-many-runs",
        `This tenant already has ${count?.count} active runs, its limit (maxActiveRuns ${options.maxActiveRuns}); wait for one to end.`,
      );
    }
    const [row] = await executor.query<RunRow>(
      `INSERT INTO moss_runs (id, tenant, thread_id, status, message, images)
       VALUES ($1, $2, $3, 'queued', $4, $5) RETURNING *`,
      [
        randomUUID(),
        tenant,
        threadId,
        storedText(message),
        options.images === undefined ? null : JSON.stringify(options.images),
      ],
    );
    const created = toRun(row!);
    await appendEvents(executor, store.view, tenant, threadId, created.id, [runStatusEvent(created)]);
    await executor.query("SELECT pg_notify($1, $2)", [CHANNELS.runs, created.id]);
    return created;
  });
}

export async function getRun(
  executor: SqlExecutor,
  tenant: string,
  threadId: string,
  runId: string,
): Promise<Run | undefined> {
  const rows = await executor.query<RunRow>(
    "SELECT * FROM moss_runs WHERE tenant = $1 AND thread_id = $2 AND id = $3",
    [tenant, threadId, runId],
  );
  return rows[0] === undefined ? undefined : toRun(rows[0]);
}

/**
 * The tenant's run, or the 404 that says what is missing: `thread-not-found` when the thread is gone (deleted, or
 * never the tenant's), so a client knows to stop asking about it, else `run-not-found`.
 */
export async function requireRun(
  executor: SqlExecutor,
  tenant: string,
  threadId: string,
  runId: string,
): Promise<Run> {
  const run = await getRun(executor, tenant, threadId, runId);
  if (run === undefined) throw await missingRun(executor, tenant, threadId, runId);
  return run;
}

/** Why a run of the tenant's is not found: its thread is not there, or the thread has no such run. */
async function missingRun(
  executor: SqlExecutor,
  tenant: string,
  threadId: string,
  runId: string,
): Promise<ServerError> {
  const thread = await executor.query("SELECT 1 FROM moss_threads WHERE tenant = $1 AND id = $2", [
    tenant,
    threadId,
  ]);
  return thread.length === 0 ? threadNotFound(threadId) : runNotFound(runId);
}

/**
 * Cancels a run from any instance: a queued or paused run ends at once; a running one is flagged and its
 * worker (told by NOTIFY, or at its next heartbeat) stops it. A run that ended already is 409 `run-finished`.
 */
export async function cancelRun(
  store: StoreParts,
  tenant: string,
  threadId: string,
  runId: string,
): Promise<Run> {
  return store.database.transaction(async (executor) => {
    const [current] = await executor.query<RunRow>(
      "SELECT * FROM moss_runs WHERE tenant = $1 AND thread_id = $2 AND id = $3 FOR UPDATE",
      [tenant, threadId, runId],
    );
    if (current === undefined) throw await missingRun(executor, tenant, threadId, runId);
    if (current.status === "queued" || current.status === "pending") {
      const [row] = await executor.query<RunRow>(
        `UPDATE moss_runs SET status = 'cancelled', stop_reason = 'aborted', lease_owner = NULL,
           lease_expires_at = NULL, updated_at = clock_timestamp() WHERE id = $1 RETURNING *`,
        [runId],
      );
      const run = toRun(row!);
      await appendEvents(executor, store.view, tenant, threadId, runId, [runStatusEvent(run)]);
      return run;
    }
    if (current.status === "running") {
      await executor.query(
        "UPDATE moss_runs SET cancel_requested = true, updated_at = clock_timestamp() WHERE id = $1",
        [runId],
      );
      await executor.query("SELECT pg_notify($1, $2)", [CHANNELS.cancel, runId]);
      return toRun(current);
    }
    throw new ServerError(
      409,
      "run-finished",
      `Run "${runId}" ended already (${current.status}): there is nothing to cancel.`,
    );
  });
}

/** The thread's active run (queued, running or waiting for a person), if it has one. */
export async function activeRun(
  executor: SqlExecutor,
  tenant: string,
  threadId: string,
): Promise<Run | undefined> {
  const rows = await executor.query<RunRow>(
    `SELECT * FROM moss_runs WHERE tenant = $1 AND thread_id = $2 AND status IN ${ACTIVE}`,
    [tenant, threadId],
  );
  return rows[0] === undefined ? undefined : toRun(rows[0]);
}
