import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { AgentEvent, AgentRunResult, ConversationStore, MossAgent } from "../../agent/index.ts";
import { DEFAULT_CONCURRENCY, DEFAULT_LEASE_MS, DEFAULT_MAX_TAKEOVERS } from "../../server-defaults.ts";
import { createServerLogger, loggedError, type ServerLogger } from "../server-log.ts";
import {
  CHANNELS,
  type ClaimedRun,
  type ClaimFairness,
  type LeaseState,
  runStatusEvent,
  ServerStore,
} from "../store/index.ts";
import type { TenantFailure } from "../tenant-view.ts";
import { RunSession } from "./session-fields.ts";
import { branchBeforeTask, pendFromCheckpoint } from "./takeover.ts";

/** The fields every log record of a run carries. */
function runFields(claimed: ClaimedRun): Record<string, unknown> {
  return { tenant: claimed.tenant, thread: claimed.run.threadId, run: claimed.run.id };
}

/**
 * Builds the agent of one thread session (a fresh one per run: the thread's state lives in the database); its
 * runtime reports each checkpoint of a run to `onCheckpoint` (see `MossRuntime.onCheckpoint`), and itself to
 * `onRuntime` once built (the worker reads the module's data fields of it).
 */
export type CreateThreadAgent = (
  sessionId: string,
  hooks?: {
    onCheckpoint?: (checkpoint: string) => unknown;
    onRuntime?: (runtime: { dataFields(): string[] }) => unknown;
  },
) => MossAgent | Promise<MossAgent>;

/** Options of {@link RunWorker}. */
export interface RunWorkerOptions {
  store: ServerStore;
  createAgent: CreateThreadAgent;
  /** The conversation store the agents use (a run taken over from a dead worker restarts on a new branch of it). */
  conversationStore: ConversationStore;
  /** Runs this worker executes at once. Default {@link DEFAULT_CONCURRENCY}. */
  concurrency?: number;
  /** How long a claim holds without a heartbeat; a worker silent that long loses its runs. Default {@link DEFAULT_LEASE_MS}. */
  leaseMs?: number;
  /** Heartbeat period. Default a third of the lease. */
  heartbeatMs?: number;
  /** The slow poll behind LISTEN/NOTIFY (it also finds runs whose lease expired). Default 5 000. */
  pollMs?: number;
  /**
   * Runs one tenant may have running at once over every worker (its share of the slots; a tenant alone may
   * otherwise use them all). Runs are claimed fairly among tenants either way. Default: no cap.
   */
  maxRunsPerTenant?: number;
  /** Names this worker in leases. Default `<hostname>:<pid>:<random>`. */
  workerId?: string;
  /**
   * How many times a run may be taken over from a worker that lost it (died, stalled, or lost the database); a run
   * claimed once more fails without running. Default {@link DEFAULT_MAX_TAKEOVERS}.
   */
  maxTakeovers?: number;
  /** The operator's log (runs claimed, taken over, ended; model errors with their details). Default: warnings to stderr. */
  logger?: ServerLogger;
}

/** Why a run was stopped from outside its code. */
type StopReason = "cancel" | "lost" | "store-failed";

const STOP_TEXTS: Readonly<Record<StopReason, string>> = {
  cancel: "it was cancelled",
  lost: "its worker no longer holds its lease",
  "store-failed": "its progress could not be stored",
};

interface ActiveRun {
  claimed: ClaimedRun;
  abort: AbortController;
  /**
   * Why the run was stopped from outside: a cancel request, the lease was lost (taken over, or it could not be
   * renewed), or a write of its progress failed (`storeError`).
   */
  stop?: StopReason;
  storeError?: unknown;
  /** When the lease was last renewed (asked), by this process's clock. */
  renewedAt: number;
  done: Promise<void>;
}

/**
 * Claims queued runs from the database (and runs whose worker died), runs each with a thread agent, stores every
 * event before anyone can read it, and records how it ended. Woken by NOTIFY, with a slow poll behind it.
 */
export class RunWorker {
  readonly workerId: string;
  readonly #store: ServerStore;
  readonly #createAgent: CreateThreadAgent;
  readonly #conversations: ConversationStore;
  readonly #concurrency: number;
  readonly #leaseMs: number;
  readonly #heartbeatMs: number;
  readonly #pollMs: number;
  readonly #fairness: ClaimFairness;
  readonly #maxTakeovers: number;
  readonly #log: ServerLogger;
  readonly #active = new Map<string, ActiveRun>();
  readonly #stops: Array<() => Promise<void>> = [];
  #poll: NodeJS.Timeout | undefined;
  #claiming: Promise<void> | undefined;
  #wakeAgain = false;
  #stopped = true;

  constructor(options: RunWorkerOptions) {
    this.#store = options.store;
    this.#createAgent = options.createAgent;
    this.#conversations = options.conversationStore;
    this.#concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
    this.#leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    this.#heartbeatMs = options.heartbeatMs ?? Math.max(50, Math.floor(this.#leaseMs / 3));
    this.#pollMs = options.pollMs ?? 5_000;
    this.#fairness = { maxRunsPerTenant: options.maxRunsPerTenant };
    this.#maxTakeovers = options.maxTakeovers ?? DEFAULT_MAX_TAKEOVERS;
    this.workerId = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.#log = (options.logger ?? createServerLogger("warn")).child({ worker: this.workerId });
  }

  /** Whether it claims runs now (started and not stopped). */
  get running(): boolean {
    return !this.#stopped;
  }

  /** Runs it executes at once at most. */
  get concurrency(): number {
    return this.#concurrency;
  }

  /** Runs being executed now. */
  get activeRuns(): number {
    return this.#active.size;
  }

  /** Starts listening for runs and cancels, and claims what is already waiting. */
  async start(): Promise<void> {
    this.#stopped = false;
    const database = this.#store.database;
    this.#stops.push(await database.listen(CHANNELS.runs, () => this.wake()));
    this.#stops.push(
      await database.listen(CHANNELS.cancel, (runId) => {
        const active = this.#active.get(runId);
        if (active !== undefined) this.#stopRun(active, "cancel");
      }),
    );
    this.#poll = setInterval(() => this.wake(), this.#pollMs);
    this.#poll.unref();
    this.wake();
  }

  /** Claims runs until this worker is full or nothing waits. */
  wake(): void {
    if (this.#stopped) return;
    if (this.#claiming !== undefined) {
      this.#wakeAgain = true;
      return;
    }
    // `.finally` runs after the assignment even when the loop has nothing to await (this worker is full).
    this.#claiming = this.#claimLoop().finally(() => {
      this.#claiming = undefined;
    });
  }

  async #claimLoop(): Promise<void> {
    try {
      do {
        this.#wakeAgain = false;
        while (!this.#stopped && this.#active.size < this.#concurrency) {
          const asked = Date.now();
          const claimed = await this.#store.claimRun(
            this.workerId,
            this.#leaseMs,
            [...this.#active.keys()],
            this.#fairness,
          );
          if (claimed === undefined) break;
          this.#begin(claimed, asked);
        }
      } while (this.#wakeAgain && !this.#stopped);
    } catch (error) {
      // The database is unreachable for now: the next NOTIFY or poll tries again.
      this.#log.warn({ event: "claim-failed", error: loggedError(error) }, "cannot claim runs");
    }
  }

  /**
   * Stops claiming; waits up to `drainMs` for the runs in progress to end. Runs still going after that are left
   * to their lease: it expires and another worker takes them over.
   */
  async stop(drainMs = 30_000): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#poll);
    await this.#claiming;
    for (const stop of this.#stops.splice(0)) await stop().catch(() => {});
    const all = Promise.all([...this.#active.values()].map((active) => active.done));
    let timer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      all.then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), drainMs);
      }),
    ]);
    clearTimeout(timer);
    if (!drained) {
      for (const active of this.#active.values()) this.#stopRun(active, "lost");
      await all;
    }
  }

  #begin(claimed: ClaimedRun, renewedAt: number): void {
    const active: ActiveRun = { claimed, abort: new AbortController(), renewedAt, done: Promise.resolve() };
    this.#active.set(claimed.run.id, active);
    active.done = this.#execute(active)
      .catch((error: unknown) => {
        this.#log.error(
          {
            event: "run-crashed",
            ...runFields(claimed),
            error: { ...loggedError(error), stack: (error as Error)?.stack },
          },
          "the worker failed on a run",
        );
      })
      .finally(() => {
        this.#active.delete(claimed.run.id);
        this.wake();
      });
  }

  /** Stops the run's code at once: no host call starts after, the calls in flight see their signal abort. */
  #stopRun(active: ActiveRun, why: StopReason, error?: unknown): void {
    if (active.stop === undefined) {
      active.stop = why;
      if (why === "store-failed") active.storeError = error;
      if (why !== "cancel") {
        this.#log.warn(
          {
            event: "run-stopped",
            ...runFields(active.claimed),
            why,
            ...(error === undefined ? {} : { error: loggedError(error) }),
          },
          `run stopped, ${STOP_TEXTS[why]}`,
        );
      }
    }
    active.abort.abort(new Error(STOP_TEXTS[active.stop]));
  }

  async #execute(active: ActiveRun): Promise<void> {
    const { claimed } = active;
    const { run, tenant } = claimed;
    const store = this.#store;
    const log = this.#log.child(runFields(claimed));
    const startedAt = performance.now();
    if (claimed.recovered && claimed.takeovers > this.#maxTakeovers) {
      log.error(
        { event: "run-takeovers-exceeded", attempt: run.attempts, takeovers: claimed.takeovers },
        "a run taken over too many times fails without running",
      );
      await this.#fail(
        active,
        `The run was taken over ${claimed.takeovers} times (its worker stopped or lost the database each time; maxTakeovers is ${this.#maxTakeovers}): it is not run again, so none of its host calls can run twice.`,
      );
      return;
    }
    const sessionId = ServerStore.sessionId(tenant, run.threadId);
    if (claimed.recovered) {
      log.warn({ event: "run-taken-over", attempt: run.attempts }, "took over a run whose worker stopped");
    } else log.info({ event: "run-claimed", attempt: run.attempts }, "run claimed");
    // The tenant sees the run start (a run resumed or taken over runs again).
    await store.appendEvent(tenant, run.threadId, run.id, runStatusEvent(run));
    // A renewal that fails, or has not answered once the lease it renews ran out, stops the run: its lease may be
    // another worker's by then. (A renewal slow under load is waited for: the checkpoint before each call is fenced.)
    let renewing = false;
    const heartbeat = setInterval(() => {
      if (renewing) {
        if (Date.now() >= active.renewedAt + this.#leaseMs) this.#stopRun(active, "lost");
        return;
      }
      renewing = true;
      const asked = Date.now();
      store.heartbeat(claimed, this.workerId, this.#leaseMs).then(
        (state) => {
          renewing = false;
          if (state === "held") active.renewedAt = asked;
          else this.#stopRun(active, state);
        },
        (error: unknown) => {
          renewing = false;
          this.#stopRun(active, "lost", error);
        },
      );
    }, this.#heartbeatMs);
    // A write of the run's progress that finds the lease gone or a cancel requested, or that fails, stops the run.
    const checked = (state: LeaseState) => {
      if (state !== "held") this.#stopRun(active, state);
    };
    const failed = (error: unknown) => this.#stopRun(active, "store-failed", error);
    // Events are stored in the order the agent emits them; the events emitted while a write is out go together in
    // the next write (one statement for a burst of a thread: text deltas come many at a time).
    let stored: Promise<unknown> = Promise.resolve();
    let burst: Array<AgentEvent & { type: string }> | undefined;
    // What the tenant reads of the failure that ended the run (the operator's log has the error itself).
    let tenantFailure: TenantFailure | undefined;
    // The data fields after each execution (a `session` event), and what changed since the thread last showed them.
    const session = new RunSession(store.view, await this.#lastSessionFields(tenant, run.threadId, log));
    const push = (event: { type: string }) => {
      if (burst !== undefined) burst.push(event as AgentEvent & { type: string });
      else {
        const events = [event as AgentEvent & { type: string }];
        burst = events;
        stored = stored.then(() => {
          if (burst === events) burst = undefined;
          if (active.stop === "lost") return undefined;
          return store.appendEvents(tenant, run.threadId, run.id, events).catch(failed);
        });
      }
    };
    const onEvent = (agentEvent: AgentEvent) => {
      const event = this.#tenantEvent(
        agentEvent,
        log,
        (failure) => {
          tenantFailure = failure;
        },
        tenantFailure,
      );
      push(event);
      const sessionEvent = session.after(agentEvent);
      if (sessionEvent !== undefined) push(sessionEvent);
      // The step's code ended: its checkpoint must not be replayed by a later takeover.
      if (event.type === "execution") {
        burst = undefined;
        stored = stored.then(() =>
          active.stop === "lost"
            ? undefined
            : store.clearCheckpoint(claimed, this.workerId).then(checked, failed),
        );
      }
    };
    // Checkpoints are kept in order with the events. The promise returned holds a starting host call until its
    // "started" checkpoint is stored under this worker's claim (a takeover then knows the call may have run); it
    // rejects, and the call does not run, when the run was stopped or the checkpoint could not be stored so.
    const onCheckpoint = (checkpoint: string) => {
      burst = undefined;
      const saved = stored.then(async () => {
        if (active.stop === undefined)
          checked(await store.saveCheckpoint(claimed, this.workerId, checkpoint));
        if (active.stop !== undefined) throw new Error(STOP_TEXTS[active.stop]);
      });
      stored = saved.catch((error: unknown) => {
        if (active.stop === undefined) failed(error);
      });
      return saved;
    };
    let resumeCheckpoint = false;
    if (claimed.recovered && claimed.answers === undefined) {
      resumeCheckpoint =
        claimed.checkpoint !== undefined &&
        (await pendFromCheckpoint(this.#conversations, sessionId, claimed.checkpoint));
      if (!resumeCheckpoint) await branchBeforeTask(this.#conversations, sessionId, run.message);
    }
    const agent = await this.#createAgent(sessionId, {
      onCheckpoint,
      onRuntime: (runtime) => {
        session.dataFields = runtime.dataFields();
      },
    });
    let result: AgentRunResult | undefined;
    let failure: unknown;
    try {
      const options = { signal: active.abort.signal, onEvent };
      result =
        claimed.answers !== undefined
          ? await agent.resume(claimed.answers, options)
          : resumeCheckpoint
            ? await agent.resume({}, options)
            : await agent.run({ task: run.message, images: claimed.images }, options);
    } catch (error) {
      failure = error;
    } finally {
      clearInterval(heartbeat);
      await agent.close().catch(() => {});
      await stored;
    }
    const durationMs = Math.round(performance.now() - startedAt);
    // A worker that lost the run stores nothing more: the run is another worker's (or will be, once its lease expires).
    if (active.stop === "lost") {
      log.warn({ event: "run-lost", durationMs }, "lost the run's lease: another worker may take it over");
      return;
    }
    let ended: { status: string; stopReason?: string } = { status: "failed" };
    try {
      if (active.stop === "cancel") {
        ended = { status: "cancelled", stopReason: "aborted" };
        await store.finishRun(claimed, this.workerId, { status: "cancelled", stopReason: "aborted" });
      } else if (active.stop === "store-failed") {
        log.error({ event: "run-error", error: loggedError(active.storeError) }, "the run's store failed");
        await this.#fail(
          active,
          `The run stopped: ${STOP_TEXTS["store-failed"]} (${messageOf(active.storeError)}).`,
        );
      } else if (failure !== undefined || result === undefined) {
        log.error({ event: "run-error", error: loggedError(failure) }, "the run failed");
        const seen = store.view.failure(failure);
        await this.#fail(active, seen.message, seen);
      } else if (result.stopReason === "pending") {
        ended = { status: "pending", stopReason: "pending" };
        await store.pauseRun(claimed, this.workerId, result.pending ?? []);
      } else {
        const failed = result.stopReason === "error" || result.stopReason === "max-consecutive-errors";
        ended = {
          status: result.stopReason === "aborted" ? "cancelled" : failed ? "failed" : "completed",
          stopReason: result.stopReason,
        };
        const reason =
          result.stopReason === "error"
            ? (tenantFailure ?? store.view.failure(result.error)).message
            : result.reason;
        await store.finishRun(claimed, this.workerId, {
          status: ended.status as "completed" | "failed" | "cancelled",
          stopReason: result.stopReason,
          ...(result.answer === undefined ? {} : { answer: result.answer }),
          ...(failed ? { error: reason } : {}),
        });
      }
    } catch (error) {
      // The outcome could not be stored: the run ends failed, once, saying so. When even that cannot be stored (the
      // database is gone), the lease expires and a takeover, bounded by maxTakeovers, decides.
      ended = { status: "failed" };
      log.error({ event: "run-error", error: loggedError(error) }, "the run's outcome could not be stored");
      await store
        .finishRun(claimed, this.workerId, {
          status: "failed",
          error: `The run's outcome could not be stored: ${messageOf(error)}`,
        })
        .catch(() => {});
    }
    log.info(
      {
        event: "run-ended",
        ...ended,
        attempt: run.attempts,
        durationMs,
        steps: result?.steps,
        usage: result?.usage,
      },
      `run ${ended.status}`,
    );
  }

  /** The fields of the thread's last `session` event (undefined when it has none, or it cannot be read now). */
  async #lastSessionFields(
    tenant: string,
    threadId: string,
    log: ServerLogger,
  ): Promise<Record<string, string> | undefined> {
    try {
      const last = await this.#store.lastEventOfType(tenant, threadId, "session");
      return last?.data.fields as Record<string, string> | undefined;
    } catch (error) {
      log.warn({ event: "session-read-failed", error: loggedError(error) }, "cannot read the last session");
      return undefined;
    }
  }

  /** Ends the run as failed with `message` (and an `error` event saying it). */
  async #fail(active: ActiveRun, message: string, error: unknown = new Error(message)): Promise<void> {
    const { claimed } = active;
    await this.#store.appendEvent(claimed.tenant, claimed.run.threadId, claimed.run.id, {
      type: "error",
      error,
      message,
    });
    await this.#store.finishRun(claimed, this.workerId, { status: "failed", error: message });
  }

  /**
   * The event as the tenant's stream gets it: a failure of the run is logged with its details for the operator and
   * reads to the tenant as a stable code (`model-unavailable`); the store's view does the rest.
   */
  #tenantEvent(
    event: AgentEvent,
    log: ServerLogger,
    onFailure: (failure: TenantFailure) => void,
    failure: TenantFailure | undefined,
  ): AgentEvent {
    if (event.type === "error") {
      log.error({ event: "run-error", error: loggedError(event.error) }, "the run failed");
      const seen = this.#store.view.failure(event.error);
      onFailure(seen);
      return { type: "error", error: seen, message: seen.message };
    }
    if (event.type === "run-end" && event.stopReason === "error" && failure !== undefined) {
      return { ...event, reason: failure.message };
    }
    return event;
  }
}

function messageOf(error: unknown): string {
  return (error as Error)?.message ?? String(error);
}
