import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { type AgentEvent, type AgentRunResult, type ConversationStore, MossAgent } from "../agent/index.ts";
import { CHANNELS, type ClaimedRun, ServerStore } from "./server-store.ts";

/**
 * Builds the agent of one thread session (a fresh one per run: the thread's state lives in the database); its
 * runtime reports each checkpoint of a run to `onCheckpoint` (see `MossRuntime.onCheckpoint`).
 */
export type CreateThreadAgent = (
  sessionId: string,
  hooks?: { onCheckpoint?: (checkpoint: string) => unknown },
) => MossAgent;

/** Options of {@link RunWorker}. */
export interface RunWorkerOptions {
  store: ServerStore;
  createAgent: CreateThreadAgent;
  /** The conversation store the agents use (a run taken over from a dead worker restarts on a new branch of it). */
  conversationStore: ConversationStore;
  /** Runs this worker executes at once. Default 8. */
  concurrency?: number;
  /** How long a claim holds without a heartbeat; a worker silent that long loses its runs. Default 30 000. */
  leaseMs?: number;
  /** Heartbeat period. Default a third of the lease. */
  heartbeatMs?: number;
  /** The slow poll behind LISTEN/NOTIFY (it also finds runs whose lease expired). Default 5 000. */
  pollMs?: number;
  /** Names this worker in leases. Default `<hostname>:<pid>:<random>`. */
  workerId?: string;
}

interface ActiveRun {
  claimed: ClaimedRun;
  abort: AbortController;
  /** Why the run was stopped from outside: a cancel request, or the lease was lost to another worker. */
  stop?: "cancel" | "lost";
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
    this.#concurrency = options.concurrency ?? 8;
    this.#leaseMs = options.leaseMs ?? 30_000;
    this.#heartbeatMs = options.heartbeatMs ?? Math.max(50, Math.floor(this.#leaseMs / 3));
    this.#pollMs = options.pollMs ?? 5_000;
    this.workerId = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
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
          const claimed = await this.#store.claimRun(this.workerId, this.#leaseMs, [...this.#active.keys()]);
          if (claimed === undefined) break;
          this.#begin(claimed);
        }
      } while (this.#wakeAgain && !this.#stopped);
    } catch (error) {
      // The database is unreachable for now: the next NOTIFY or poll tries again.
      process.emitWarning(`moss worker ${this.workerId}: cannot claim runs: ${(error as Error).message}`);
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

  #begin(claimed: ClaimedRun): void {
    const active: ActiveRun = { claimed, abort: new AbortController(), done: Promise.resolve() };
    this.#active.set(claimed.run.id, active);
    active.done = this.#execute(active)
      .catch((error: unknown) => {
        process.emitWarning(
          `moss worker ${this.workerId}: run ${claimed.run.id}: ${(error as Error).stack ?? error}`,
        );
      })
      .finally(() => {
        this.#active.delete(claimed.run.id);
        this.wake();
      });
  }

  #stopRun(active: ActiveRun, why: "cancel" | "lost"): void {
    active.stop ??= why;
    active.abort.abort(why);
  }

  async #execute(active: ActiveRun): Promise<void> {
    const { claimed } = active;
    const { run, tenant } = claimed;
    const store = this.#store;
    const sessionId = ServerStore.sessionId(tenant, run.threadId);
    const heartbeat = setInterval(() => {
      store.heartbeat(run.id, this.workerId, this.#leaseMs).then(
        (state) => {
          if (state !== "held") this.#stopRun(active, state);
        },
        () => {},
      );
    }, this.#heartbeatMs);
    // Events are stored in the order the agent emits them; the events emitted while a write is out go together in
    // the next write (one statement for a burst of a thread: text deltas come many at a time).
    let stored: Promise<unknown> = Promise.resolve();
    let storeFailure: unknown;
    let burst: Array<AgentEvent & { type: string }> | undefined;
    const onEvent = (event: AgentEvent) => {
      if (burst !== undefined) burst.push(event as AgentEvent & { type: string });
      else {
        const events = [event as AgentEvent & { type: string }];
        burst = events;
        stored = stored.then(() => {
          if (burst === events) burst = undefined;
          if (active.stop === "lost") return undefined;
          return store.appendEvents(tenant, run.threadId, run.id, events).catch((error) => {
            storeFailure ??= error;
          });
        });
      }
      // The step's code ended: its checkpoint must not be replayed by a later takeover.
      if (event.type === "execution") {
        burst = undefined;
        stored = stored.then(() => store.clearCheckpoint(run.id, this.workerId).catch(() => {}));
      }
    };
    // Checkpoints are kept in order with the events. The promise returned holds a starting host call until its
    // "started" checkpoint is stored (a takeover then knows the call may have run); one that cannot be stored costs
    // a repeat of that call on a takeover.
    const onCheckpoint = (checkpoint: string) => {
      burst = undefined;
      stored = stored.then(() =>
        active.stop === "lost"
          ? undefined
          : store.saveCheckpoint(run.id, this.workerId, checkpoint).catch(() => {}),
      );
      return stored;
    };
    let resumeCheckpoint = false;
    if (claimed.recovered && claimed.answers === undefined) {
      resumeCheckpoint =
        claimed.checkpoint !== undefined && (await this.#pendFromCheckpoint(sessionId, claimed.checkpoint));
      if (!resumeCheckpoint) await this.#branchBeforeTask(sessionId, run.message);
    }
    const agent = this.#createAgent(sessionId, { onCheckpoint });
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
    if (active.stop === "lost") return;
    if (storeFailure !== undefined) failure ??= storeFailure;
    if (active.stop === "cancel") {
      await store.finishRun(claimed, this.workerId, { status: "cancelled", stopReason: "aborted" });
    } else if (failure !== undefined || result === undefined) {
      await store.appendEvent(tenant, run.threadId, run.id, {
        type: "error",
        error: failure,
        message: (failure as Error)?.message ?? String(failure),
      });
      await store.finishRun(claimed, this.workerId, {
        status: "failed",
        error: (failure as Error)?.message ?? String(failure),
      });
    } else if (result.stopReason === "pending") {
      await store.pauseRun(claimed, this.workerId, result.pending ?? []);
    } else {
      const failed = result.stopReason === "error" || result.stopReason === "max-consecutive-errors";
      await store.finishRun(claimed, this.workerId, {
        status: result.stopReason === "aborted" ? "cancelled" : failed ? "failed" : "completed",
        stopReason: result.stopReason,
        ...(result.answer === undefined ? {} : { answer: result.answer }),
        ...(failed ? { error: result.reason } : {}),
      });
    }
  }

  /**
   * A run taken over from a dead worker whose step was running code (its model answer and the observations of the
   * step's completed actions are stored, the running action's code left a checkpoint) continues that step: the
   * checkpoint becomes the paused step of the conversation's head, which the agent resumes with no answers,
   * replaying the host calls the dead worker completed, then running the step's later actions; the model is not
   * asked again and no completed action runs again. Resolves false when the conversation is not at such a step.
   */
  async #pendFromCheckpoint(sessionId: string, checkpoint: string): Promise<boolean> {
    const conversation = await this.#conversations.load(sessionId);
    if (conversation === undefined || !MossAgent.pendFromCheckpoint(conversation, checkpoint)) return false;
    await this.#conversations.save(sessionId, conversation);
    return true;
  }

  /**
   * A run taken over from a dead worker starts again from its task: the conversation's head moves back to before
   * the task's message, so the lost attempt stays as an abandoned branch and the model does not see it twice.
   */
  async #branchBeforeTask(sessionId: string, message: string): Promise<void> {
    const conversation = await this.#conversations.load(sessionId);
    if (conversation === undefined) return;
    const task = [...conversation.thread()]
      .reverse()
      .find((entry) => entry.role === "user" && entry.content === message);
    if (task === undefined) return;
    conversation.checkout(task.parentId);
    await this.#conversations.save(sessionId, conversation);
  }
}
