import { createHash, randomUUID } from "node:crypto";
import { requestAnswerProblem } from "../answers.ts";
import type { Answer, Answers, ImageContent, PendingRequest } from "../types.ts";
import { LIST_PAGE_BYTES } from "./answer-bounds.ts";
import type { Database, SqlExecutor } from "./database.ts";
import { ServerError } from "./server-error.ts";
import { readStoredJson, readStoredText, storedJson, storedText } from "./stored-text.ts";
import { TenantView } from "./tenant-view.ts";

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

/** An event as stored: its per-thread id, its run, its AgentEvent type and its data (the event plus `runId`). */
export interface StoredEvent {
  id: number;
  runId: string | null;
  type: string;
  data: Record<string, unknown>;
}

/** A run a worker holds: the run and what to do with it. */
export interface ClaimedRun {
  run: Run;
  tenant: string;
  /** The answers to resume the paused run with; undefined for a new message. */
  answers: Answers | undefined;
  /** The worker that held it before lost its lease (it died or stalled). */
  recovered: boolean;
  /** The last checkpoint (see `MossRuntime.onCheckpoint`) the worker that held it stored; a takeover resumes it. */
  checkpoint: string | undefined;
  /** The images the run's message carries (checked when it was posted), sent to the model with it. */
  images: ImageContent[];
  /** The fencing token of this claim (the run's `attempts` it made): a write under an older claim changes nothing. */
  generation: number;
  /** How many times the run was taken over from a worker that lost it (this claim included). */
  takeovers: number;
}

/** A response the answers endpoint gives (stored under its Idempotency-Key). */
export interface StoredResponse {
  status: number;
  body: Record<string, unknown>;
}

/** The NOTIFY channels: new or resumed runs, stored events, cancel requests. */
export const CHANNELS = Object.freeze({
  runs: "moss_runs",
  events: "moss_events",
  cancel: "moss_cancel",
});

const ACTIVE = "('queued', 'running', 'pending')";

/**
 * The run `$1` is held by worker `$2` under claim `$3` (its `attempts` then): the fencing condition of every write
 * a worker makes for a run, so a worker whose lease was taken over stores nothing.
 */
const HELD = "id = $1 AND lease_owner = $2 AND attempts = $3 AND status = 'running'";

/** Whether a worker still holds a run, and whether a cancel of it was requested. */
export type LeaseState = "held" | "cancel" | "lost";

function leaseState(rows: Array<{ cancel_requested: boolean }>): LeaseState {
  if (rows[0] === undefined) return "lost";
  return rows[0].cancel_requested ? "cancel" : "held";
}

interface RunRow {
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

function toRun(row: RunRow): Run {
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

interface ThreadRow {
  id: string;
  metadata: Record<string, unknown>;
  created_at: Date | string;
}

function toThread(row: ThreadRow): Thread {
  return { id: row.id, metadata: row.metadata, createdAt: isoTime(row.created_at) };
}

function isoTime(value: Date | string): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

/** How {@link ServerStore.claimRun} shares runs among tenants. */
export interface ClaimFairness {
  /** Runs one tenant may have running at once, over every worker (its share of the slots). Default: no cap. */
  maxRunsPerTenant?: number | undefined;
}

/*
 * Fair claiming (issue 23 §3): the run claimed next belongs to the tenant with the fewest runs running now, then to
 * the tenant whose last claim is oldest (round-robin among tenants with queued work), then it is that tenant's
 * oldest run; a tenant at its share (`$4`, null: no cap) is skipped. One tenant's queue cannot keep another's run
 * waiting behind it.
 */
const FAIR_CLAIM_TENANTS = `busy AS (
         SELECT tenant AS busy_tenant, count(*) AS running FROM moss_runs
         WHERE status = 'running' AND lease_expires_at >= clock_timestamp() GROUP BY tenant
       )`;
const FAIR_CLAIM_JOIN = `LEFT JOIN busy ON busy.busy_tenant = moss_runs.tenant
         LEFT JOIN moss_tenant_turns AS turn ON turn.tenant = moss_runs.tenant`;
const FAIR_CLAIM_SHARE = "($4::integer IS NULL OR coalesce(busy.running, 0) < $4::integer)";
const FAIR_CLAIM_ORDER = "coalesce(busy.running, 0), turn.claimed_at NULLS FIRST";
const FAIR_CLAIM_TURN = `turn AS (
         INSERT INTO moss_tenant_turns (tenant, claimed_at) SELECT tenant, clock_timestamp() FROM claimed
         ON CONFLICT (tenant) DO UPDATE SET claimed_at = excluded.claimed_at
       )`;

/**
 * Threads, runs, events, pending requests and idempotency keys in the database (PGlite or PostgreSQL): every
 * rule about them is one SQL statement or transaction here, so every instance on the database keeps them alike.
 */
export class ServerStore {
  readonly database: Database;
  /** The one redactor of what tenants read: every event and a run's answer and error pass it before they are stored. */
  readonly view: TenantView;

  constructor(database: Database, view: TenantView = new TenantView()) {
    this.database = database;
    this.view = view;
  }

  /** The session id of a thread's MossContext and conversation (tenants never share one). */
  static sessionId(tenant: string, threadId: string): string {
    return `${tenant}/${threadId}`;
  }

  /** Creates the thread, or returns the tenant's existing one with that id (`created` false). */
  async createThread(
    tenant: string,
    id: string | undefined,
    metadata: Record<string, unknown> = {},
  ): Promise<{ thread: Thread; created: boolean }> {
    const threadId = id ?? randomUUID();
    const inserted = await this.database.query<ThreadRow>(
      `INSERT INTO moss_threads (tenant, id, metadata) VALUES ($1, $2, $3)
       ON CONFLICT (tenant, id) DO NOTHING RETURNING id, metadata, created_at`,
      [tenant, threadId, JSON.stringify(metadata)],
    );
    if (inserted[0] !== undefined) return { thread: toThread(inserted[0]), created: true };
    const existing = await this.getThread(tenant, threadId);
    if (existing === undefined) throw new Error(`thread ${threadId} vanished while it was created`);
    return { thread: existing, created: false };
  }

  async getThread(tenant: string, threadId: string): Promise<Thread | undefined> {
    const rows = await this.database.query<ThreadRow>(
      "SELECT id, metadata, created_at FROM moss_threads WHERE tenant = $1 AND id = $2",
      [tenant, threadId],
    );
    return rows[0] === undefined ? undefined : toThread(rows[0]);
  }

  /**
   * The tenant's threads, newest first; `before` is the id of the last thread of the previous page (400
   * `before-unknown` when the tenant has no such thread: an empty page would read as the end of the list).
   */
  async listThreads(tenant: string, limit: number, before?: string): Promise<Thread[]> {
    if (before !== undefined && (await this.getThread(tenant, before)) === undefined) {
      throw new ServerError(
        400,
        "before-unknown",
        `?before names no thread of yours ("${before}"): pass the id of the last thread of the previous page.`,
      );
    }
    const rows = await this.database.query<ThreadRow>(
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
  async listThreadPage(
    tenant: string,
    limit: number,
    before?: string,
    maxBytes = LIST_PAGE_BYTES,
  ): Promise<{ threads: Thread[]; next?: string }> {
    if (before !== undefined && (await this.getThread(tenant, before)) === undefined) {
      throw new ServerError(
        400,
        "before-unknown",
        `?before names no thread of yours ("${before}"): pass the id of the last thread of the previous page.`,
      );
    }
    // One more than the page is read (its size only) to know whether more remain.
    const rows = await this.database.query<ThreadRow & { fits: boolean }>(
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
  async threadState(tenant: string, threadId: string): Promise<ThreadState | undefined> {
    const rows = await this.database.query<ThreadRow & { last_event_id: number }>(
      "SELECT id, metadata, created_at, last_event_id FROM moss_threads WHERE tenant = $1 AND id = $2",
      [tenant, threadId],
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    const active = await this.activeRun(this.database, tenant, threadId);
    const pending =
      active?.status === "pending" ? await this.pendingRequests(this.database, active.id, true) : [];
    return {
      thread: toThread(row),
      status: active === undefined ? "idle" : active.status === "pending" ? "pending" : "running",
      ...(active === undefined ? {} : { runId: active.id }),
      pending: this.view.value(pending),
      lastEventId: row.last_event_id,
    };
  }

  /**
   * Queues a run of `message` in the thread: 404 when the thread is not the tenant's, 409 `thread-busy` while
   * another run of it is active, 429 `too-many-runs` when the tenant already has `maxActiveRuns` active runs.
   */
  async createRun(
    tenant: string,
    threadId: string,
    message: string,
    options: { images?: ImageContent[]; maxActiveRuns: number },
  ): Promise<Run> {
    const run = await this.database.transaction(async (executor) => {
      // One run creation per tenant at a time (held to the commit), so its active-run count stays exact.
      await executor.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`moss-tenant-runs\n${tenant}`]);
      const thread = await executor.query(
        "SELECT 1 FROM moss_threads WHERE tenant = $1 AND id = $2 FOR UPDATE",
        [tenant, threadId],
      );
      if (thread.length === 0) throw threadNotFound(threadId);
      const active = await this.activeRun(executor, tenant, threadId);
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
      await this.appendEventIn(executor, tenant, threadId, created.id, runStatusEvent(created));
      await executor.query("SELECT pg_notify($1, $2)", [CHANNELS.runs, created.id]);
      return created;
    });
    return run;
  }

  /**
   * The tenant's run, or the 404 that says what is missing: `thread-not-found` when the thread is gone (deleted, or
   * never the tenant's), so a client knows to stop asking about it, else `run-not-found`.
   */
  async requireRun(tenant: string, threadId: string, runId: string): Promise<Run> {
    const run = await this.getRun(tenant, threadId, runId);
    if (run === undefined) throw await this.#missingRun(this.database, tenant, threadId, runId);
    return run;
  }

  /** Why a run of the tenant's is not found: its thread is not there, or the thread has no such run. */
  async #missingRun(
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

  async getRun(tenant: string, threadId: string, runId: string): Promise<Run | undefined> {
    const rows = await this.database.query<RunRow>(
      "SELECT * FROM moss_runs WHERE tenant = $1 AND thread_id = $2 AND id = $3",
      [tenant, threadId, runId],
    );
    return rows[0] === undefined ? undefined : toRun(rows[0]);
  }

  /** Stores an event of the thread under the next id and notifies every listener (after the commit). */
  async appendEvent(
    tenant: string,
    threadId: string,
    runId: string | null,
    event: { type: string; [key: string]: unknown },
  ): Promise<number> {
    return this.appendEventsIn(this.database, tenant, threadId, runId, [event]);
  }

  /**
   * Stores a burst of events of the thread under the next ids, in order, in one statement (one round trip, atomic
   * on its own), and notifies every listener once; resolves the last id.
   */
  async appendEvents(
    tenant: string,
    threadId: string,
    runId: string | null,
    events: ReadonlyArray<{ type: string; [key: string]: unknown }>,
  ): Promise<number> {
    return this.appendEventsIn(this.database, tenant, threadId, runId, events);
  }

  /** The thread's events with an id above `after`, in order (at most `limit`). */
  async eventsAfter(tenant: string, threadId: string, after: number, limit = 500): Promise<StoredEvent[]> {
    return (await this.eventPage(tenant, threadId, after, limit, Number.MAX_SAFE_INTEGER)).events;
  }

  /**
   * The thread's events with an id above `after`, in order: at most `limit`, and no more than `maxBytes` of stored
   * JSON beyond the first (the database leaves the rest behind, so a reader's page is bounded in bytes). `more`:
   * the page was cut (by either bound), more events may follow at once.
   */
  async eventPage(
    tenant: string,
    threadId: string,
    after: number,
    limit: number,
    maxBytes: number,
  ): Promise<{ events: StoredEvent[]; more: boolean }> {
    const rows = await this.database.query<{
      id: number;
      run_id: string | null;
      type: string;
      data: Record<string, unknown>;
      page_rows: number | string;
    }>(
      `SELECT id, run_id, type, data, page_rows FROM (
         SELECT id, run_id, type, data, size, count(*) OVER () AS page_rows,
           sum(size) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) - size AS before_bytes
         FROM (SELECT id, run_id, type, data, octet_length(data::text) AS size FROM moss_events
               WHERE tenant = $1 AND thread_id = $2 AND id > $3 ORDER BY id LIMIT $4) AS page
       ) AS sized
       WHERE before_bytes = 0 OR before_bytes + size <= $5::bigint ORDER BY id`,
      [tenant, threadId, after, limit, maxBytes],
    );
    const events = rows.map((row) => ({ id: row.id, runId: row.run_id, type: row.type, data: row.data }));
    const pageRows = rows.length === 0 ? 0 : Number(rows[0]!.page_rows);
    return { events, more: pageRows === limit || pageRows > rows.length };
  }

  /** The thread's last event id (0 before the first), or undefined when the thread is not the tenant's. */
  async lastEventId(tenant: string, threadId: string): Promise<number | undefined> {
    const rows = await this.database.query<{ last_event_id: number }>(
      "SELECT last_event_id FROM moss_threads WHERE tenant = $1 AND id = $2",
      [tenant, threadId],
    );
    return rows[0]?.last_event_id;
  }

  /**
   * Claims a run that is queued, or running under a lease that expired (its worker died), for `owner`
   * (in the fair order among tenants, see `FAIR_CLAIM_ORDER`; `fairness` caps a tenant's share)
   * until `leaseMs` from now, except the runs in `holding` (the claimer runs them already: its heartbeat was
   * late, not the worker dead). Concurrent claimers skip each other's rows (`FOR UPDATE SKIP LOCKED`).
   */
  async claimRun(
    owner: string,
    leaseMs: number,
    holding: string[] = [],
    fairness: ClaimFairness = {},
  ): Promise<ClaimedRun | undefined> {
    const rows = await this.database.query<RunRow & { recovered: boolean }>(
      `WITH ${FAIR_CLAIM_TENANTS}, next AS (
         SELECT id, status = 'running' AS recovered FROM moss_runs
         ${FAIR_CLAIM_JOIN}
         WHERE (status = 'queued' OR (status = 'running' AND lease_expires_at < clock_timestamp()))
           AND NOT (id = ANY($3::text[]))
           AND ${FAIR_CLAIM_SHARE}
         ORDER BY ${FAIR_CLAIM_ORDER}, created_at LIMIT 1 FOR UPDATE OF moss_runs SKIP LOCKED
       ), claimed AS (
       UPDATE moss_runs AS run SET status = 'running', lease_owner = $1,
         lease_expires_at = clock_timestamp() + $2::double precision * interval '1 millisecond',
         heartbeat_at = clock_timestamp(), attempts = run.attempts + 1, updated_at = clock_timestamp(),
         takeovers = run.takeovers + CASE WHEN next.recovered THEN 1 ELSE 0 END
       FROM next WHERE run.id = next.id
       RETURNING run.*, next.recovered
       ), ${FAIR_CLAIM_TURN}
       SELECT * FROM claimed`,
      [owner, leaseMs, holding, fairness.maxRunsPerTenant ?? null],
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    return {
      run: toRun(row),
      tenant: row.tenant,
      answers: row.answers === null ? undefined : readStoredJson(row.answers),
      recovered: row.recovered,
      checkpoint: row.checkpoint == null ? undefined : readStoredText(row.checkpoint),
      images: row.images ?? [],
      generation: row.attempts,
      takeovers: row.takeovers ?? 0,
    };
  }

  /**
   * Keeps the latest checkpoint of a run `owner` holds under this claim (a signed continuation of the run so far):
   * the worker that takes the run over if this one dies resumes from it. Resolves `held` when stored, `cancel` when
   * it was stored but a cancel was requested (a call must not start), `lost` when nothing was stored (the claim is
   * no longer this worker's: another took the run over).
   */
  async saveCheckpoint(claimed: ClaimedRun, owner: string, checkpoint: string): Promise<LeaseState> {
    const rows = await this.database.query<{ cancel_requested: boolean }>(
      `UPDATE moss_runs SET checkpoint = $4 WHERE ${HELD} RETURNING cancel_requested`,
      [claimed.run.id, owner, claimed.generation, storedText(checkpoint)],
    );
    return leaseState(rows);
  }

  /** Forgets a run's checkpoint once its step is over (a later takeover must not replay a finished step). */
  async clearCheckpoint(claimed: ClaimedRun, owner: string): Promise<LeaseState> {
    const rows = await this.database.query<{ cancel_requested: boolean }>(
      `UPDATE moss_runs SET checkpoint = NULL WHERE ${HELD} RETURNING cancel_requested`,
      [claimed.run.id, owner, claimed.generation],
    );
    return leaseState(rows);
  }

  /**
   * Extends the lease of a run `owner` holds under this claim. Resolves `lost` when the claim is no longer its
   * (another worker took the run over after the lease expired), else whether a cancel was requested.
   */
  async heartbeat(claimed: ClaimedRun, owner: string, leaseMs: number): Promise<LeaseState> {
    const rows = await this.database.query<{ cancel_requested: boolean }>(
      `UPDATE moss_runs SET lease_expires_at = clock_timestamp() + $4::double precision * interval '1 millisecond',
         heartbeat_at = clock_timestamp()
       WHERE ${HELD} RETURNING cancel_requested`,
      [claimed.run.id, owner, claimed.generation, leaseMs],
    );
    return leaseState(rows);
  }

  /**
   * Ends a run the owner holds (completed, failed or cancelled) and stores its `run-status` event; resolves
   * undefined (and changes nothing) when the owner lost the run meanwhile.
   */
  async finishRun(
    claimed: ClaimedRun,
    owner: string,
    outcome: {
      status: "completed" | "failed" | "cancelled";
      stopReason?: string;
      answer?: string;
      error?: string;
    },
  ): Promise<Run | undefined> {
    return this.database.transaction(async (executor) => {
      const [row] = await executor.query<RunRow>(
        `UPDATE moss_runs SET status = $4, stop_reason = $5, answer = $6, error = $7, lease_owner = NULL,
           lease_expires_at = NULL, answers = NULL, checkpoint = NULL, updated_at = clock_timestamp()
         WHERE ${HELD} RETURNING *`,
        [
          claimed.run.id,
          owner,
          claimed.generation,
          outcome.status,
          outcome.stopReason ?? null,
          outcome.answer === undefined ? null : storedText(this.view.text(outcome.answer)),
          outcome.error === undefined ? null : storedText(this.view.text(outcome.error)),
        ],
      );
      if (row === undefined) return undefined;
      const run = toRun(row);
      await this.appendEventIn(executor, claimed.tenant, run.threadId, run.id, runStatusEvent(run));
      return run;
    });
  }

  /** Parks a run the owner holds until its requests are answered (on any instance). */
  async pauseRun(claimed: ClaimedRun, owner: string, requests: PendingRequest[]): Promise<Run | undefined> {
    return this.database.transaction(async (executor) => {
      const [row] = await executor.query<RunRow>(
        `UPDATE moss_runs SET status = 'pending', stop_reason = 'pending', lease_owner = NULL,
           lease_expires_at = NULL, answers = NULL, updated_at = clock_timestamp()
         WHERE ${HELD} RETURNING *`,
        [claimed.run.id, owner, claimed.generation],
      );
      if (row === undefined) return undefined;
      await executor.query("DELETE FROM moss_pending_requests WHERE run_id = $1", [claimed.run.id]);
      for (const [position, request] of requests.entries()) {
        await executor.query(
          "INSERT INTO moss_pending_requests (run_id, id, position, kind, request) VALUES ($1, $2, $3, $4, $5)",
          [claimed.run.id, request.id, position, request.kind, storedJson(request)],
        );
      }
      const run = toRun(row);
      await this.appendEventIn(executor, claimed.tenant, run.threadId, run.id, runStatusEvent(run));
      return run;
    });
  }

  /**
   * Answers pending requests of the thread's paused run (of run `runId`, when the answer names the run it was given
   * for). Answers may come in several posts; once every request has one, the run is queued again to resume. With
   * an `idempotencyKey`, the first response is stored and returned again for the same key (nothing is applied
   * twice); the key with another body is 409.
   */
  async answer(
    tenant: string,
    threadId: string,
    answers: Record<string, unknown>,
    idempotencyKey: string | undefined,
    runId?: string,
  ): Promise<StoredResponse> {
    const requestHash = createHash("sha256")
      .update(JSON.stringify(runId === undefined ? [threadId, answers] : [threadId, answers, runId]))
      .digest("hex");
    return this.database.transaction(async (executor) => {
      if (idempotencyKey !== undefined) {
        // Taken first and held to the commit: a second post with the same key waits here, then sees the first.
        await executor.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`${tenant}\n${idempotencyKey}`]);
        const [stored] = await executor.query<{
          request_hash: string;
          status: number;
          body: Record<string, unknown>;
        }>("SELECT request_hash, status, body FROM moss_idempotency_keys WHERE tenant = $1 AND key = $2", [
          tenant,
          idempotencyKey,
        ]);
        if (stored !== undefined) {
          if (stored.request_hash !== requestHash) {
            throw new ServerError(
              409,
              "idempotency-key-reused",
              `Idempotency-Key "${idempotencyKey}" was already used with another request; use a new key for new answers.`,
            );
          }
          return { status: stored.status, body: readStoredJson(stored.body) };
        }
      }
      const response = await this.applyAnswers(executor, tenant, threadId, answers, runId);
      if (idempotencyKey !== undefined) {
        await executor.query(
          "INSERT INTO moss_idempotency_keys (tenant, key, request_hash, status, body) VALUES ($1, $2, $3, $4, $5)",
          [tenant, idempotencyKey, requestHash, response.status, storedJson(response.body)],
        );
      }
      return response;
    });
  }

  /**
   * Cancels a run from any instance: a queued or paused run ends at once; a running one is flagged and its
   * worker (told by NOTIFY, or at its next heartbeat) stops it. A run that ended already is 409 `run-finished`.
   */
  async cancelRun(tenant: string, threadId: string, runId: string): Promise<Run> {
    return this.database.transaction(async (executor) => {
      const [current] = await executor.query<RunRow>(
        "SELECT * FROM moss_runs WHERE tenant = $1 AND thread_id = $2 AND id = $3 FOR UPDATE",
        [tenant, threadId, runId],
      );
      if (current === undefined) throw await this.#missingRun(executor, tenant, threadId, runId);
      if (current.status === "queued" || current.status === "pending") {
        const [row] = await executor.query<RunRow>(
          `UPDATE moss_runs SET status = 'cancelled', stop_reason = 'aborted', lease_owner = NULL,
             lease_expires_at = NULL, updated_at = clock_timestamp() WHERE id = $1 RETURNING *`,
          [runId],
        );
        const run = toRun(row!);
        await this.appendEventIn(executor, tenant, threadId, runId, runStatusEvent(run));
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

  /**
   * Deletes the tenant's thread with its runs, events, pending requests, answers' idempotency keys, stored context
   * and conversation, in one transaction: 404 when the tenant has no such thread, 409 `thread-busy` while a worker
   * runs one of its runs (cancel it first; a queued or paused run goes with the thread). Resolves the runs deleted.
   */
  async deleteThread(tenant: string, threadId: string): Promise<number> {
    return this.database.transaction(async (executor) => {
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
      const sessionId = ServerStore.sessionId(tenant, threadId);
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

  /** The continuation key every instance on this database signs paused runs with (`candidate` if it is the first). */
  async continuationKey(candidate: string): Promise<string> {
    await this.database.query(
      "INSERT INTO moss_settings (key, value) VALUES ('continuation-key', $1) ON CONFLICT (key) DO NOTHING",
      [candidate],
    );
    const [row] = await this.database.query<{ value: string }>(
      "SELECT value FROM moss_settings WHERE key = 'continuation-key'",
    );
    return row!.value;
  }

  /**
   * The one matcher of answers to requests on the server (native API, the client, the playground, AG-UI resume): an
   * answer applies only to a request, by its id (`r<call>-<tag>`: one request of one run), that the thread's paused
   * run waits for now, and only to that run when the answer names one. Any other id (a request of another run, of
   * a finished run, of a pause the run went past) is 404 `request-unknown`, and nothing of the post is applied.
   */
  private async applyAnswers(
    executor: SqlExecutor,
    tenant: string,
    threadId: string,
    answers: Record<string, unknown>,
    runId?: string,
  ): Promise<StoredResponse> {
    const thread = await executor.query("SELECT 1 FROM moss_threads WHERE tenant = $1 AND id = $2", [
      tenant,
      threadId,
    ]);
    if (thread.length === 0) throw threadNotFound(threadId);
    const [run] = await executor.query<RunRow>(
      `SELECT * FROM moss_runs WHERE tenant = $1 AND thread_id = $2 AND status = 'pending' FOR UPDATE`,
      [tenant, threadId],
    );
    const ids = Object.keys(answers);
    if (run === undefined || (runId !== undefined && run.id !== runId)) {
      throw new ServerError(
        404,
        "request-unknown",
        `${runId === undefined ? `Thread "${threadId}" has no run` : `Run "${runId}" of thread "${threadId}" is not`} waiting for an answer (request ${ids.map((id) => `"${id}"`).join(", ")}).`,
      );
    }
    const requests = await this.pendingRequests(executor, run.id, false);
    const byId = new Map(requests.map((request) => [request.id, request]));
    const unknown = ids.filter((id) => !byId.has(id));
    if (unknown.length > 0) {
      throw new ServerError(
        404,
        "request-unknown",
        `No pending request of thread "${threadId}" has the id ${unknown.map((id) => `"${id}"`).join(", ")}; it waits for ${requests.map((request) => `"${request.id}"`).join(", ")}.`,
      );
    }
    for (const id of ids) {
      const problem = requestAnswerProblem(byId.get(id)!, answers[id]);
      if (problem !== undefined) throw new ServerError(400, "answer-invalid", `Request "${id}" ${problem}.`);
    }
    for (const id of ids) {
      await executor.query(
        `UPDATE moss_pending_requests SET answer = $3, answered_at = clock_timestamp()
         WHERE run_id = $1 AND id = $2`,
        [run.id, id, storedJson(answers[id])],
      );
    }
    const rows = await executor.query<{ id: string; answer: Answer | null }>(
      "SELECT id, answer FROM moss_pending_requests WHERE run_id = $1",
      [run.id],
    );
    if (rows.some((row) => row.answer === null)) return { status: 202, body: { run: toRun(run) } };
    const all = Object.fromEntries(rows.map((row) => [row.id, readStoredJson(row.answer!)]));
    const [queued] = await executor.query<RunRow>(
      `UPDATE moss_runs SET status = 'queued', answers = $2, updated_at = clock_timestamp()
       WHERE id = $1 RETURNING *`,
      [run.id, storedJson(all)],
    );
    await executor.query("DELETE FROM moss_pending_requests WHERE run_id = $1", [run.id]);
    const resumed = toRun(queued!);
    await this.appendEventIn(executor, tenant, threadId, run.id, runStatusEvent(resumed));
    await executor.query("SELECT pg_notify($1, $2)", [CHANNELS.runs, run.id]);
    return { status: 202, body: { run: resumed } };
  }

  private async activeRun(executor: SqlExecutor, tenant: string, threadId: string): Promise<Run | undefined> {
    const rows = await executor.query<RunRow>(
      `SELECT * FROM moss_runs WHERE tenant = $1 AND thread_id = $2 AND status IN ${ACTIVE}`,
      [tenant, threadId],
    );
    return rows[0] === undefined ? undefined : toRun(rows[0]);
  }

  private async pendingRequests(
    executor: SqlExecutor,
    runId: string,
    unansweredOnly: boolean,
  ): Promise<PendingRequest[]> {
    const rows = await executor.query<{ request: PendingRequest }>(
      `SELECT request FROM moss_pending_requests WHERE run_id = $1 ${unansweredOnly ? "AND answer IS NULL" : ""}
       ORDER BY position`,
      [runId],
    );
    return rows.map((row) => readStoredJson(row.request));
  }

  private async appendEventIn(
    executor: SqlExecutor,
    tenant: string,
    threadId: string,
    runId: string | null,
    event: { type: string; [key: string]: unknown },
  ): Promise<number> {
    return this.appendEventsIn(executor, tenant, threadId, runId, [event]);
  }

  /**
   * The one writer of events: the thread's counter moves past the burst, the events take the ids it passed, and
   * the NOTIFY names the last, all in one statement (PGlite runs on the thread serving HTTP: each round trip
   * there blocks it, and a statement is atomic without BEGIN and COMMIT).
   */
  private async appendEventsIn(
    executor: SqlExecutor,
    tenant: string,
    threadId: string,
    runId: string | null,
    events: ReadonlyArray<{ type: string; [key: string]: unknown }>,
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
        events.map((event) => wireJson({ ...this.view.event(event), runId })),
        CHANNELS.events,
      ],
    );
    if (row === undefined) throw threadNotFound(threadId);
    return row.last_event_id;
  }
}

/** The `run-status` event stored whenever a run changes status. */
export function runStatusEvent(run: Run): { type: "run-status"; status: RunStatus; run: Run } {
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

export function threadNotFound(threadId: string): ServerError {
  return new ServerError(404, "thread-not-found", `No thread "${threadId}".`);
}

function runNotFound(runId: string): ServerError {
  return new ServerError(404, "run-not-found", `No run "${runId}".`);
}
