// A run's trace: the host calls of each of its executions, read from the thread's stored `execution` events (which
// passed the tenant view, so their payloads are redacted), in pages bounded in count and bytes.
import type { RunTrace, TraceExecution } from "../protocol.ts";
import type { Database } from "./database.ts";
import { requireRun } from "./run-store.ts";

/** Most executions one page of a trace holds. */
export const TRACE_PAGE_EXECUTIONS = 100;

/** Most bytes of calls one page of a trace holds beyond its first execution. */
export const TRACE_PAGE_BYTES = 4 * 1024 * 1024;

/**
 * The trace of the tenant's run: its executions with an event id above `after`, in order. 404 `thread-not-found`
 * for a thread that is not the tenant's, `run-not-found` for a run the thread does not have.
 */
export async function runTrace(
  database: Database,
  tenant: string,
  threadId: string,
  runId: string,
  after = 0,
  maxBytes = TRACE_PAGE_BYTES,
): Promise<RunTrace> {
  const run = await requireRun(database, tenant, threadId, runId);
  // The calls as their stored text (only the fields the trace shows are read out of each event).
  const rows = await database.query<{
    id: number;
    step: number | null;
    ok: boolean;
    paused: boolean;
    duration_ms: number | string | null;
    calls: string;
    page_rows: number | string;
  }>(
    `SELECT id, step, ok, paused, duration_ms, calls, page_rows FROM (
       SELECT *, count(*) OVER () AS page_rows,
         sum(octet_length(calls)) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) - octet_length(calls) AS before_bytes
       FROM (SELECT id, (data->>'step')::integer AS step,
               coalesce(data->'execution'->>'ok', '') = 'true' AS ok,
               data->'execution'->'pending' IS NOT NULL AS paused,
               (data->'execution'->>'durationMs')::float8 AS duration_ms,
               coalesce(data->'execution'->'calls', '[]'::json)::text AS calls
             FROM moss_events
             WHERE tenant = $1 AND thread_id = $2 AND run_id = $3 AND type = 'execution' AND id > $4
             ORDER BY id LIMIT $5) AS page
     ) AS sized
     WHERE before_bytes = 0 OR before_bytes + octet_length(calls) <= $6::bigint ORDER BY id`,
    [tenant, threadId, runId, after, TRACE_PAGE_EXECUTIONS, maxBytes],
  );
  const executions = rows.map(
    (row): TraceExecution => ({
      step: row.step ?? 0,
      eventId: row.id,
      ok: row.ok,
      paused: row.paused,
      durationMs: Number(row.duration_ms ?? 0),
      calls: JSON.parse(row.calls) as TraceExecution["calls"],
    }),
  );
  const pageRows = rows.length === 0 ? 0 : Number(rows[0]!.page_rows);
  const more = pageRows === TRACE_PAGE_EXECUTIONS || pageRows > rows.length;
  return {
    runId: run.id,
    status: run.status,
    executions,
    ...(more && executions.length > 0 ? { next: executions.at(-1)!.eventId } : {}),
  };
}
