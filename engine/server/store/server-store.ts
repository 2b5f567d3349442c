import type { ImageContent, PendingRequest } from "../../types.ts";
import type { Run, RunTrace, Thread, ThreadState } from "../protocol.ts";
import { TenantView } from "../tenant-view.ts";
import { answer, type StoredResponse } from "./answer-store.ts";
import type { Database } from "./database.ts";
import {
  appendEvents,
  type EventInput,
  eventPage,
  lastEventId,
  lastEventOfType,
  type StoredEvent,
  storedMessage,
} from "./event-log.ts";
import {
  type ClaimedRun,
  type ClaimFairness,
  claimRun,
  clearCheckpoint,
  finishRun,
  heartbeat,
  type LeaseState,
  pauseRun,
  saveCheckpoint,
} from "./run-queue.ts";
import { cancelRun, createRun, getRun, requireRun } from "./run-store.ts";
import { runTrace } from "./run-trace.ts";
import { type StoreParts, sessionIdOf } from "./store-rows.ts";
import {
  createThread,
  deleteThread,
  getThread,
  listThreadPage,
  listThreads,
  threadState,
  updateThread,
} from "./thread-store.ts";

/**
 * Threads, runs, events, pending requests and idempotency keys in the database (PGlite or PostgreSQL): every
 * rule about them is one SQL statement or transaction, so every instance on the database keeps them alike. Each
 * job is a file of this room (threads, runs, the run queue and its leases, the event log, answers); this class is
 * the one object the server, the worker and the tests hold.
 */
export class ServerStore implements StoreParts {
  readonly database: Database;
  /** The one redactor of what tenants read: every event and a run's answer and error pass it before they are stored. */
  readonly view: TenantView;

  constructor(database: Database, view: TenantView = new TenantView()) {
    this.database = database;
    this.view = view;
  }

  /** The session id of a thread's MossContext and conversation (tenants never share one). */
  static sessionId(tenant: string, threadId: string): string {
    return sessionIdOf(tenant, threadId);
  }

  // Threads (thread-store.ts).

  /** Creates the thread, or returns the tenant's existing one with that id (`created` false). */
  createThread(
    tenant: string,
    id: string | undefined,
    metadata?: Record<string, unknown>,
  ): Promise<{ thread: Thread; created: boolean }> {
    return createThread(this.database, tenant, id, metadata);
  }

  getThread(tenant: string, threadId: string): Promise<Thread | undefined> {
    return getThread(this.database, tenant, threadId);
  }

  /** The tenant's threads, newest first (400 `before-unknown` when `before` names none of them). */
  listThreads(tenant: string, limit: number, before?: string): Promise<Thread[]> {
    return listThreads(this.database, tenant, limit, before);
  }

  /** One page of the tenant's threads, bounded in count and bytes; `next` says more remain. */
  listThreadPage(
    tenant: string,
    limit: number,
    before?: string,
    maxBytes?: number,
  ): Promise<{ threads: Thread[]; next?: string }> {
    return listThreadPage(this.database, tenant, limit, before, maxBytes);
  }

  /** Replaces the tenant's thread's metadata (404 `thread-not-found` when the tenant has no such thread). */
  updateThread(tenant: string, threadId: string, metadata: Record<string, unknown>): Promise<Thread> {
    return updateThread(this.database, tenant, threadId, metadata);
  }

  /** The thread, whether a run is active or waits for a person, its unanswered requests and its last event id. */
  threadState(tenant: string, threadId: string): Promise<ThreadState | undefined> {
    return threadState(this, tenant, threadId);
  }

  /** Deletes the tenant's thread and everything of it (409 `thread-busy` while one of its runs runs). */
  deleteThread(tenant: string, threadId: string): Promise<number> {
    return deleteThread(this.database, tenant, threadId);
  }

  // Runs (run-store.ts).

  /** Queues a run of `message` in the thread (404, 409 `thread-busy`, 429 `too-many-runs`). */
  createRun(
    tenant: string,
    threadId: string,
    message: string,
    options: { images?: ImageContent[]; maxActiveRuns: number },
  ): Promise<Run> {
    return createRun(this, tenant, threadId, message, options);
  }

  getRun(tenant: string, threadId: string, runId: string): Promise<Run | undefined> {
    return getRun(this.database, tenant, threadId, runId);
  }

  /** The tenant's run, or the 404 that says what is missing (`thread-not-found` or `run-not-found`). */
  requireRun(tenant: string, threadId: string, runId: string): Promise<Run> {
    return requireRun(this.database, tenant, threadId, runId);
  }

  /** The host calls of the tenant's run, by execution (see `runTrace`); 404s as {@link requireRun}. */
  runTrace(tenant: string, threadId: string, runId: string, after?: number): Promise<RunTrace> {
    return runTrace(this.database, tenant, threadId, runId, after);
  }

  /** Cancels a run from any instance (409 `run-finished` when it ended already). */
  cancelRun(tenant: string, threadId: string, runId: string): Promise<Run> {
    return cancelRun(this, tenant, threadId, runId);
  }

  // Answers (answer-store.ts).

  /** Answers pending requests of the thread's paused run, once per Idempotency-Key. */
  answer(
    tenant: string,
    threadId: string,
    answers: Record<string, unknown>,
    idempotencyKey: string | undefined,
    runId?: string,
  ): Promise<StoredResponse> {
    return answer(this, tenant, threadId, answers, idempotencyKey, runId);
  }

  // The event log (event-log.ts).

  /** Stores an event of the thread under the next id and notifies every listener (after the commit). */
  appendEvent(tenant: string, threadId: string, runId: string | null, event: EventInput): Promise<number> {
    return appendEvents(this.database, this.view, tenant, threadId, runId, [event]);
  }

  /** Stores a burst of events of the thread under the next ids, in order, in one statement; resolves the last id. */
  appendEvents(
    tenant: string,
    threadId: string,
    runId: string | null,
    events: ReadonlyArray<EventInput>,
  ): Promise<number> {
    return appendEvents(this.database, this.view, tenant, threadId, runId, events);
  }

  /** The thread's events with an id above `after`, in order (at most `limit`). */
  async eventsAfter(tenant: string, threadId: string, after: number, limit = 500): Promise<StoredEvent[]> {
    return (await eventPage(this.database, tenant, threadId, after, limit, Number.MAX_SAFE_INTEGER)).events;
  }

  /** The thread's events with an id above `after`, bounded in count and bytes; `more`: the page was cut. */
  eventPage(
    tenant: string,
    threadId: string,
    after: number,
    limit: number,
    maxBytes: number,
  ): Promise<{ events: StoredEvent[]; more: boolean }> {
    return eventPage(this.database, tenant, threadId, after, limit, maxBytes);
  }

  /** The thread's last event id (0 before the first), or undefined when the thread is not the tenant's. */
  lastEventId(tenant: string, threadId: string): Promise<number | undefined> {
    return lastEventId(this.database, tenant, threadId);
  }

  /** The thread's last stored event of `type` with when it was stored (the last `session` event: its data now). */
  lastEventOfType(
    tenant: string,
    threadId: string,
    type: string,
  ): Promise<{ data: Record<string, unknown>; createdAt: string } | undefined> {
    return lastEventOfType(this.database, tenant, threadId, type);
  }

  /** A message of the thread as its `message` event stored it (with its images), by the message's id. */
  storedMessage(
    tenant: string,
    threadId: string,
    messageId: string,
  ): Promise<Record<string, unknown> | undefined> {
    return storedMessage(this.database, tenant, threadId, messageId);
  }

  // The run queue and its leases (run-queue.ts).

  /** Claims the next run for `owner` in the fair order among tenants, under a lease of `leaseMs`. */
  claimRun(
    owner: string,
    leaseMs: number,
    holding?: string[],
    fairness?: ClaimFairness,
  ): Promise<ClaimedRun | undefined> {
    return claimRun(this, owner, leaseMs, holding, fairness);
  }

  /** Keeps the latest checkpoint of a run `owner` holds under this claim. */
  saveCheckpoint(claimed: ClaimedRun, owner: string, checkpoint: string): Promise<LeaseState> {
    return saveCheckpoint(this, claimed, owner, checkpoint);
  }

  /** Forgets a run's checkpoint once its step is over. */
  clearCheckpoint(claimed: ClaimedRun, owner: string): Promise<LeaseState> {
    return clearCheckpoint(this, claimed, owner);
  }

  /** Extends the lease of a run `owner` holds under this claim. */
  heartbeat(claimed: ClaimedRun, owner: string, leaseMs: number): Promise<LeaseState> {
    return heartbeat(this, claimed, owner, leaseMs);
  }

  /** Ends a run the owner holds and stores its `run-status` event (undefined when the owner lost it). */
  finishRun(
    claimed: ClaimedRun,
    owner: string,
    outcome: {
      status: "completed" | "failed" | "cancelled";
      stopReason?: string;
      answer?: string;
      error?: string;
    },
  ): Promise<Run | undefined> {
    return finishRun(this, claimed, owner, outcome);
  }

  /** Parks a run the owner holds until its requests are answered (on any instance). */
  pauseRun(claimed: ClaimedRun, owner: string, requests: PendingRequest[]): Promise<Run | undefined> {
    return pauseRun(this, claimed, owner, requests);
  }

  // Settings.

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
}
