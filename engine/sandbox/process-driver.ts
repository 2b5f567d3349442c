import { availableParallelism } from "node:os";
import { MossError } from "../errors.ts";
import type { ExecutionLimits } from "../types.ts";
import { MEBIBYTE } from "./child-death.ts";
import { spinMicrosecondsOf } from "./event-loop-awake.ts";
import { ProcessSession } from "./process-session.ts";
import {
  type HostMembrane,
  type SandboxDriver,
  type SandboxSession,
  type SessionSetupSource,
  setupOf,
} from "./sandbox.ts";
import { type ChildRun, NotStarted, SandboxChild } from "./sandbox-child.ts";

export { acceptsRabGsabFlag } from "./sandbox-entry.ts";

/** Options of the process driver. */
export interface ProcessDriverOptions {
  /** Spare ready sandbox processes kept warm, ahead of demand. Default 2. */
  poolSize?: number;
  /**
   * Most sandbox processes alive at once, spares included. Sessions spread over them; once every process is taken,
   * sessions share processes (each still in its own isolate and context). Default: twice the cores, at least 4.
   */
  maxProcesses?: number;
  /**
   * Most sessions one sandbox process keeps warm (each an isolate with its context, about 1–2 MiB). When every slot
   * is taken, the least recently used idle session is evicted: its next run rebuilds it from its runtime's persisted
   * context. Default 64.
   */
  sessionsPerProcess?: number;
  /**
   * Resident size past which a sandbox process keeps no more sessions warm: each session opened there evicts its
   * least recently used idle session first. Bounds the warm sessions by what they hold, not only by their count.
   * Default 512 MiB.
   */
  processMemoryBytes?: number;
  /** Most runs waiting for one sandbox process (it runs one at a time); one more fails with `queue-full`. Default 64. */
  maxQueuedRuns?: number;
  /** Extra time past a run's wall-time limit before a silent sandbox process is killed. Default 2000 ms. */
  unresponsiveGraceMs?: number;
  /** Time a sandbox process may take to start and report ready. Default 30000 ms. */
  startTimeoutMs?: number;
  /**
   * How long a side of the membrane polls for what it expects next instead of sleeping: a sandbox process polls its
   * call pipe for a host call's reply (and its event loop for settlements), and this process's event loop keeps
   * polling after each call and message. Waking a sleeping thread costs tens of µs per crossing on an idle machine;
   * polling costs CPU only for this window after the last crossing, never while nothing crosses. 0 turns it off.
   * Default 300 µs, at most 5000.
   */
  spinMicroseconds?: number;
}

/** Places tried by one open whose process ends while the session opens there. */
const OPEN_ATTEMPTS = 2;

/** Delay before a spare taken by a session is replaced. */
const REFILL_DELAY_MS = 500;

/**
 * The default driver: a bounded pool of supervised sandbox processes shared by every session, refilled ahead of
 * demand with spare ready processes (each with a primed isolate). Sessions spread over the processes, each in its own
 * isolate and context; a process runs one session at a time. Model code that aborts V8, spins or stalls ends only its
 * own run; the host never dies. Host calls cross the process boundary to the membrane in this process.
 */
export class ProcessDriver implements SandboxDriver {
  readonly name = "process" as const;
  readonly #poolSize: number;
  readonly #maxProcesses: number;
  readonly #sessionsPerProcess: number;
  readonly #processMemoryBytes: number;
  readonly #maxQueuedRuns: number;
  readonly #graceMs: number;
  readonly #startTimeoutMs: number;
  readonly #spinMicroseconds: number;
  readonly #spares: SandboxChild[] = [];
  /** The next spare taken was started by `prestart`: the pool refills after a delay, not at once. */
  #refillLater = false;
  /** Processes holding sessions. */
  readonly #active = new Set<SandboxChild>();
  #closed = false;
  #refill: NodeJS.Timeout | undefined;
  #nextSession = 1;
  readonly #slotWaiters: Array<() => void> = [];

  constructor(options: ProcessDriverOptions = {}) {
    this.#maxProcesses = Math.max(
      1,
      Math.floor(options.maxProcesses ?? Math.max(4, 2 * availableParallelism())),
    );
    this.#poolSize = Math.min(this.#maxProcesses, Math.max(1, options.poolSize ?? 2));
    this.#sessionsPerProcess = Math.max(1, Math.floor(options.sessionsPerProcess ?? 64));
    this.#processMemoryBytes = options.processMemoryBytes ?? 512 * MEBIBYTE;
    this.#maxQueuedRuns = Math.max(1, Math.floor(options.maxQueuedRuns ?? 64));
    this.#graceMs = options.unresponsiveGraceMs ?? 2_000;
    this.#startTimeoutMs = options.startTimeoutMs ?? 30_000;
    this.#spinMicroseconds = spinMicrosecondsOf(options.spinMicroseconds, "spinMicroseconds");
  }

  /** Process ids of the running sandbox processes, spares and ones holding sessions (for supervision and tests). */
  get pids(): number[] {
    return [...this.#spares, ...this.#active]
      .filter((child) => !child.exited)
      .map((child) => child.process.pid!);
  }

  /** Process ids of the spare (holding no session) sandbox processes. */
  get sparePids(): number[] {
    return this.#spares.filter((child) => !child.exited).map((child) => child.process.pid!);
  }

  /** Starts the pool of spares (done lazily by `open`); resolves when every spare is ready. */
  async start(): Promise<void> {
    this.#fill();
    await Promise.all(this.#spares.map((child) => child.whenReady()));
  }

  /**
   * Starts one spare now if no process is starting or running: the first open then takes it, and the pool refills
   * after a delay, as after a first open without a spare (a one-shot run has ended by then). Resolves once the
   * spares are ready.
   */
  async prestart(): Promise<void> {
    if (this.#spares.length === 0 && this.#active.size === 0) {
      this.#fill(1);
      this.#refillLater = true;
    }
    await Promise.all(this.#spares.map((child) => child.whenReady()));
  }

  async open(
    setup: SessionSetupSource,
    membrane: HostMembrane,
    limits: ExecutionLimits,
  ): Promise<SandboxSession> {
    for (let attempt = 1; ; attempt++) {
      if (this.#closed) throw new MossError("sandbox-failed", "the process sandbox driver is closed");
      const child = await this.#place();
      const session = new ProcessSession(this.#nextSession++, membrane, setup, this);
      session.child = child;
      try {
        await child.open(session, setupOf(setup), limits.memoryLimitBytes);
        return session;
      } catch (error) {
        session.lost();
        this.slotFreed();
        if (child.sessions.size === 0 && this.#active.delete(child)) await child.stop();
        // Its process ended during the open (another session's run there crashed it): open elsewhere, once.
        if (!child.exited || attempt >= OPEN_ATTEMPTS) throw error;
      }
    }
  }

  /**
   * The process a new session goes to: a process of its own while the pool has room and a spare is ready (the spare
   * is replaced at once, ahead of the next open), else a live process with no run that holds fewer than its even
   * share of the sessions (opening an isolate there costs milliseconds, starting a process hundreds; the least
   * recently used idle session there is evicted when it is full), else a starting spare while the pool has room;
   * else it waits until a process finishes its run.
   */
  async #place(): Promise<SandboxChild> {
    for (;;) {
      const child = this.#placeNow();
      if (child !== undefined) return child;
      // Every process is running, or every slot holds a session that is: wait (bounded) until a run ends.
      if (this.#slotWaiters.length >= this.#maxQueuedRuns) {
        throw new MossError(
          "queue-full",
          `every sandbox slot (${this.#maxProcesses} processes × ${this.#sessionsPerProcess} sessions) holds a running session and ${this.#slotWaiters.length} sessions wait for one (the limit, maxQueuedRuns); try again later`,
        );
      }
      await new Promise<void>((resolve) => this.#slotWaiters.push(resolve));
      if (this.#closed) throw new MossError("sandbox-failed", "the process sandbox driver is closed");
    }
  }

  /** A run ended or a session left: sessions waiting for a slot try again. */
  slotFreed(): void {
    for (const resolve of this.#slotWaiters.splice(0)) resolve();
  }

  #placeNow(): SandboxChild | undefined {
    const live = this.#live();
    const idle = this.#idleProcess(this.#evenShare(live));
    if (idle !== undefined) {
      // Shared for want of a ready spare: the pool grows toward maxProcesses now, so later sessions spread out
      // (a run waiting behind a long run moves to a process with nothing to do, and there must be some).
      if (live.length < this.#maxProcesses) this.#replaceSpare();
      this.#refillLater = false;
      return idle;
    }
    // Counted again: an eviction just now may have ended a process (its last session gone).
    if (this.#live().length < this.#maxProcesses) {
      // No ready spare. None at all (the first open, a one-shot script): start just the one this open needs; the pool
      // refills a moment later, off the critical path.
      if (this.#spares.length === 0) this.#fill(1);
      const child = this.#spares.shift()!;
      this.#active.add(child);
      this.#scheduleRefill();
      this.#refillLater = false;
      return child;
    }
    // Every process is running a session's run: the open waits for one to finish. Opened in a busy process, the
    // session would wait for that run (a spinner's, to its limit) before its isolate even exists.
    return undefined;
  }

  /**
   * How many sessions a process may hold before a new session goes to a process of its own: the sessions spread
   * evenly over the most processes the pool may hold. Packed into the few processes that happened to be ready, the
   * sessions of one would all wait behind a long run there and then each be rebuilt elsewhere (issue 17: 20 trivial
   * executes beside a spinner took up to 1 s). Unbounded once the pool is full.
   */
  #evenShare(live: SandboxChild[]): number {
    if (live.length >= this.#maxProcesses) return Number.POSITIVE_INFINITY;
    const held = live.reduce((sum, child) => sum + child.sessions.size, 0);
    return Math.ceil((held + 1) / this.#maxProcesses);
  }

  /**
   * A ready process with no run in flight or waiting that can take one more session: a ready spare while the pool
   * has room (replaced at once), else a process holding fewer than `share` sessions (after evicting an idle one if
   * it is full, by count or by memory).
   */
  #idleProcess(share = Number.POSITIVE_INFINITY): SandboxChild | undefined {
    const spare = this.#readySpare();
    if (spare !== undefined) return spare;
    const idle = [...this.#active].filter(
      (child) => child.isReady && !child.busy && child.sessions.size < share,
    );
    idle.sort((a, b) => a.sessions.size - b.sessions.size);
    for (const child of idle) {
      // Opens placed at the same moment may have filled it past the bound: evict down to one free slot.
      while (child.sessions.size >= this.#sessionsPerProcess && this.#evict(child));
      // The size as last read (after this process's last open or run; placing reads no file).
      if ((child.residentBytes ?? 0) > this.#processMemoryBytes) this.#evict(child);
      // Its last session evicted, the process ended (released): a new session goes to a process that lives.
      if (!this.#active.has(child) || child.exited) continue;
      if (child.sessions.size < this.#sessionsPerProcess) return child;
    }
    return undefined;
  }

  /** The processes holding sessions that have not ended. */
  #live(): SandboxChild[] {
    return [...this.#active].filter((child) => !child.exited);
  }

  /** A ready spare while the pool has room, taken (and replaced at once, ahead of the next demand). */
  #readySpare(): SandboxChild | undefined {
    const live = this.#live().length;
    const index = this.#spares.findIndex((child) => child.isReady);
    if (live >= this.#maxProcesses || index === -1) return undefined;
    const spare = this.#spares.splice(index, 1)[0]!;
    this.#active.add(spare);
    this.#replaceSpare();
    return spare;
  }

  /**
   * Moves runs that wait behind another session's run (a process runs one isolate at a time, so a V8 abort cannot
   * take a neighbour's run with it) to processes with nothing to do: the session is rebuilt there from its runtime's
   * data, as after an eviction. A session never waits for a long run of another while a process is idle.
   */
  balance(): void {
    if (this.#closed) return;
    for (;;) {
      let source: SandboxChild | undefined;
      for (const child of this.#active) {
        if (child.waiting > 0 && (source === undefined || child.waiting > source.waiting)) source = child;
      }
      if (source === undefined) return;
      const target = this.#idleProcess();
      if (target === undefined) return;
      const run = source.takeWaiting()!;
      void this.#move(run, target);
    }
  }

  async #move(run: ChildRun, target: SandboxChild): Promise<void> {
    try {
      await run.session.moveTo(target, run.request.limits.memoryLimitBytes);
    } catch (error) {
      run.reject(new NotStarted((error as Error)?.message ?? String(error)));
      return;
    }
    target.enqueue(run);
  }

  /** Evicts the least recently used session (of one process, or of all) not running or waiting to run; false if none. */
  #evict(within?: SandboxChild): boolean {
    let victim: ProcessSession | undefined;
    for (const child of within === undefined ? this.#active : [within]) {
      for (const session of child.sessions.values()) {
        if (session.running) continue;
        if (victim === undefined || session.lastUsed < victim.lastUsed) victim = session;
      }
    }
    victim?.evict();
    return victim !== undefined;
  }

  /** A session left its process (disposed or evicted): a process left with no session ends. */
  released(child: SandboxChild): void {
    this.slotFreed();
    if (child.sessions.size > 0 || !this.#active.delete(child)) return;
    void child.stop("disposed");
  }

  /** Replaces a taken spare: at once, or after a delay when `prestart` started it (a one-shot run ends first). */
  #replaceSpare(): void {
    if (this.#refillLater) this.#scheduleRefill();
    else this.#fill();
  }

  /**
   * Starting a process costs a few hundred ms of CPU: the replacement starts a moment later, so it does not compete
   * with the session just handed out (its open and first run). An open that finds no spare starts one at once.
   */
  #scheduleRefill(): void {
    if (this.#refill !== undefined || this.#closed) return;
    this.#refill = setTimeout(() => {
      this.#refill = undefined;
      this.#fill();
    }, REFILL_DELAY_MS);
    this.#refill.unref();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.slotFreed();
    clearTimeout(this.#refill);
    const children = [...this.#spares, ...this.#active];
    this.#spares.length = 0;
    this.#active.clear();
    await Promise.all(children.map((child) => child.stop("disposed")));
  }

  #fill(count = this.#poolSize): void {
    // Spares count toward the bound: processes holding sessions plus spares never exceed maxProcesses.
    const room = () => this.#maxProcesses - [...this.#active].filter((child) => !child.exited).length;
    while (!this.#closed && this.#spares.length < Math.min(count, room())) {
      const child: SandboxChild = new SandboxChild({
        graceMs: this.#graceMs,
        spinMicroseconds: this.#spinMicroseconds,
        startTimeoutMs: this.#startTimeoutMs,
        maxQueuedRuns: this.#maxQueuedRuns,
        onEmpty: (empty) => this.released(empty),
        onRebalance: () => this.balance(),
        onExit: () => {
          this.#active.delete(child);
          this.slotFreed();
          const index = this.#spares.indexOf(child);
          if (index === -1) return;
          this.#spares.splice(index, 1);
          // A spare that died after starting well is replaced at once; one that never started is replaced on the
          // next open, so a machine that cannot start sandbox processes does not spawn in a loop.
          if (child.readyOnce) this.#fill();
        },
      });
      this.#spares.push(child);
    }
  }
}
