// The event log: each thread's events under per-thread ids, written in bursts by one statement and read in pages
// bounded in count and bytes; every write NOTIFYs the readers of the thread on every instance.
import type { Run, RunStatusEvent } from "../protocol.ts";
import type { TenantView } from "../tenant-view.ts";
import type { Database, SqlExecutor } from "./database.ts";
import { CHANNELS, threadNotFound } from "./store-rows.ts";

/**
 * An event as stored: its per-thread id, its run, its AgentEvent type and its data (the event plus `runId`). `json`
 * is the data's text exactly as stored, what the native stream sends (read once, never parsed for it); `data` is
 * parsed from it when first read (AG-UI reads it).
 */
export interface StoredEvent {
  id: number;
  runId: string | null;
  type: string;
  /** The stored JSON text of `data`, and its size in UTF-8 bytes. */
  json: string;
  bytes: number;
  readonly data: Record<string, unknown>;
}

function storedEvent(
  id: number,
  runId: string | null,
  type: string,
  json: string,
  bytes: number,
): StoredEvent {
  let data: Record<string, unknown> | undefined;
  return {
    id,
    runId,
    type,
    json,
    bytes,
    get data() {
      data ??= JSON.parse(json) as Record<string, unknown>;
      return data;
    },
  };
}

/** An event as a writer hands it to the log (before the tenant's view and `runId` are applied). */
export type EventInput = { type: string; [key: string]: unknown };

/**
 * The one writer of events: the thread's counter moves past the burst, the events take the ids it passed, and
 * the NOTIFY names the last, all in one statement (PGlite runs on the thread serving HTTP: each round trip
 * there blocks it, and a statement is atomic without BEGIN and COMMIT). Resolves the last id.
 */
export async function appendEvents(
  executor: SqlExecutor,
  view: TenantView,
  tenant: string,
  threadId: string,
  runId: string | null,
  events: ReadonlyArray<EventInput>,
): Promise<number> {
  const [row] = await executor.query<{ last_event_id: number }>(
    `WITH bumped AS (
       UPDATE moss_threads SET last_event_id = last_event_id + cardinality($4::text[])
       WHERE tenant = $1 AND id = $2 RETURNING last_event_id
     ), stored AS (
       INSERT INTO moss_events (tenant, thread_id, id, run_id, type, data)
       SELECT $1::text, $2::text, bumped.last_event_id - cardinality($4::text[]) + item.position::integer, $3::text, item.type,
         item.data::json
       FROM bumped, unnest($4::text[], $5::text[]) WITH ORDINALITY AS item(type, data, position)
     )
     SELECT last_event_id, pg_notify($6, json_build_array($1::text, $2::text, last_event_id)::text) FROM bumped`,
    [
      tenant,
      threadId,
      runId,
      events.map((event) => event.type),
      events.map((event) => wireJson({ ...view.event(event), runId })),
      CHANNELS.events,
    ],
  );
  if (row === undefined) throw threadNotFound(threadId);
  return row.last_event_id;
}

/**
 * The thread's events with an id above `after`, in order: at most `limit`, and no more than `maxBytes` of stored
 * JSON beyond the first (the database leaves the rest behind, so a reader's page is bounded in bytes). `more`:
 * the page was cut (by either bound), more events may follow at once.
 */
export async function eventPage(
  database: Database,
  tenant: string,
  threadId: string,
  after: number,
  limit: number,
  maxBytes: number,
): Promise<{ events: StoredEvent[]; more: boolean }> {
  // The data as its stored text (`data::text` of a `json` column is the text written): no parse, no stringify.
  const rows = await database.query<{
    id: number;
    run_id: string | null;
    type: string;
    data: string;
    size: number | string;
    page_rows: number | string;
  }>(
    `SELECT id, run_id, type, data::text AS data, size, page_rows FROM (
       SELECT id, run_id, type, data, size, count(*) OVER () AS page_rows,
         sum(size) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) - size AS before_bytes
       FROM (SELECT id, run_id, type, data, octet_length(data::text) AS size FROM moss_events
             WHERE tenant = $1 AND thread_id = $2 AND id > $3 ORDER BY id LIMIT $4) AS page
     ) AS sized
     WHERE before_bytes = 0 OR before_bytes + size <= $5::bigint ORDER BY id`,
    [tenant, threadId, after, limit, maxBytes],
  );
  const events = rows.map((row) => storedEvent(row.id, row.run_id, row.type, row.data, Number(row.size)));
  const pageRows = rows.length === 0 ? 0 : Number(rows[0]!.page_rows);
  return { events, more: pageRows === limit || pageRows > rows.length };
}

/** The thread's last event id (0 before the first), or undefined when the thread is not the tenant's. */
export async function lastEventId(
  database: Database,
  tenant: string,
  threadId: string,
): Promise<number | undefined> {
  const rows = await database.query<{ last_event_id: number }>(
    "SELECT last_event_id FROM moss_threads WHERE tenant = $1 AND id = $2",
    [tenant, threadId],
  );
  return rows[0]?.last_event_id;
}

/**
 * The thread's last stored event of `type` (its data as stored, and when it was stored), or undefined when it has none
 * or the thread is not the tenant's.
 */
export async function lastEventOfType(
  database: Database,
  tenant: string,
  threadId: string,
  type: string,
): Promise<{ data: Record<string, unknown>; createdAt: string } | undefined> {
  const rows = await database.query<{ data: string; created_at: Date | string }>(
    `SELECT data::text AS data, created_at FROM moss_events
     WHERE tenant = $1 AND thread_id = $2 AND type = $3 ORDER BY id DESC LIMIT 1`,
    [tenant, threadId, type],
  );
  const row = rows[0];
  if (row === undefined) return undefined;
  return { data: JSON.parse(row.data) as Record<string, unknown>, createdAt: isoTime(row.created_at) };
}

/** The message with `messageId` as the thread's first `message` event stored it, or undefined. */
export async function storedMessage(
  database: Database,
  tenant: string,
  threadId: string,
  messageId: string,
): Promise<Record<string, unknown> | undefined> {
  const rows = await database.query<{ message: string }>(
    `SELECT (data -> 'message')::text AS message FROM moss_events
     WHERE tenant = $1 AND thread_id = $2 AND type = 'message' AND data -> 'message' ->> 'id' = $3
     ORDER BY id LIMIT 1`,
    [tenant, threadId, messageId],
  );
  const row = rows[0];
  return row === undefined ? undefined : (JSON.parse(row.message) as Record<string, unknown>);
}

function isoTime(value: Date | string): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

/** The `run-status` event stored whenever a run changes status. */
export function runStatusEvent(run: Run): RunStatusEvent {
  return { type: "run-status", status: run.status, run };
}

/** JSON of an event for storage and the wire: errors keep name, message and code; bigints become strings. */
export function wireJson(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) => {
    if (typeof inner === "bigint") return inner.toString();
    if (inner instanceof Error) {
      const coded = inner as Error & { code?: unknown; details?: unknown };
      return {
        name: inner.name,
        message: inner.message,
        ...(typeof coded.code === "string" ? { code: coded.code } : {}),
      };
    }
    return inner;
  });
}
