// The run queue and its leases: workers claim runs fairly among tenants under a lease they renew, and every write
// a worker makes for a run is fenced by its claim, so a worker whose lease was taken over stores nothing.
import type { Answers, ImageContent, PendingRequest } from "../../types.ts";
import type { Run } from "../protocol.ts";
import { appendEvents, runStatusEvent } from "./event-log.ts";
import { type RunRow, type StoreParts, toRun } from "./store-rows.ts";
import { readStoredJson, readStoredText, storedJson, storedText } from "./stored-text.ts";

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

/** How {@link claimRun} shares runs among tenants. */
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
 * Claims a run that is queued, or running under a lease that expired (its worker died), for `owner`
 * (in the fair order among tenants, see `FAIR_CLAIM_ORDER`; `fairness` caps a tenant's share)
 * until `leaseMs` from now, except the runs in `holding` (the claimer runs them already: its heartbeat was
 * late, not the worker dead). Concurrent claimers skip each other's rows (`FOR UPDATE SKIP LOCKED`).
 */
export async function claimRun(
  store: StoreParts,
  owner: string,
  leaseMs: number,
  holding: string[] = [],
  fairness: ClaimFairness = {},
): Promise<ClaimedRun | undefined> {
  const rows = await store.database.query<RunRow & { recovered: boolean }>(
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
export async function saveCheckpoint(
  store: StoreParts,
  claimed: ClaimedRun,
  owner: string,
  checkpoint: string,
): Promise<LeaseState> {
  const rows = await store.database.query<{ cancel_requested: boolean }>(
    `UPDATE moss_runs SET checkpoint = $4 WHERE ${HELD} RETURNING cancel_requested`,
    [claimed.run.id, owner, claimed.generation, storedText(checkpoint)],
  );
  return leaseState(rows);
}

/** Forgets a run's checkpoint once its step is over (a later takeover must not replay a finished step). */
export async function clearCheckpoint(
  store: StoreParts,
  claimed: ClaimedRun,
  owner: string,
): Promise<LeaseState> {
  const rows = await store.database.query<{ cancel_requested: boolean }>(
    `UPDATE moss_runs SET checkpoint = NULL WHERE ${HELD} RETURNING cancel_requested`,
    [claimed.run.id, owner, claimed.generation],
  );
  return leaseState(rows);
}

/**
 * Extends the lease of a run `owner` holds under this claim. Resolves `lost` when the claim is no longer its
 * (another worker took the run over after the lease expired), else whether a cancel was requested.
 */
export async function heartbeat(
  store: StoreParts,
  claimed: ClaimedRun,
  owner: string,
  leaseMs: number,
): Promise<LeaseState> {
  const rows = await store.database.query<{ cancel_requested: boolean }>(
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
export async function finishRun(
  store: StoreParts,
  claimed: ClaimedRun,
  owner: string,
  outcome: {
    status: "completed" | "failed" | "cancelled";
    stopReason?: string;
    answer?: string;
    error?: string;
  },
): Promise<Run | undefined> {
  return store.database.transaction(async (executor) => {
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
        outcome.answer === undefined ? null : storedText(store.view.text(outcome.answer)),
        outcome.error === undefined ? null : storedText(store.view.text(outcome.error)),
      ],
    );
    if (row === undefined) return undefined;
    const run = toRun(row);
    await appendEvents(executor, store.view, claimed.tenant, run.threadId, run.id, [runStatusEvent(run)]);
    return run;
  });
}

/** Parks a run the owner holds until its requests are answered (on any instance). */
export async function pauseRun(
  store: StoreParts,
  claimed: ClaimedRun,
  owner: string,
  requests: PendingRequest[],
): Promise<Run | undefined> {
  return store.database.transaction(async (executor) => {
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
    await appendEvents(executor, store.view, claimed.tenant, run.threadId, run.id, [runStatusEvent(run)]);
    return run;
  });
}
