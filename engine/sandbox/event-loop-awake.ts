import { openSync, readSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { MossError } from "../errors.ts";

/** How long a thread waiting on the other side of the membrane polls before it sleeps, unless a driver says. */
export const DEFAULT_SPIN_MICROSECONDS = 300;

/** The most a driver may set: a spin is a bounded wait, never a way to hold a core. */
export const MAX_SPIN_MICROSECONDS = 5_000;

/** A driver's spin option as a number of microseconds within its bounds (a bad value is refused by name). */
export function spinMicrosecondsOf(value: number | undefined, optionName: string): number {
  if (value === undefined) return DEFAULT_SPIN_MICROSECONDS;
  if (!Number.isFinite(value) || value < 0 || value > MAX_SPIN_MICROSECONDS)
    throw new MossError(
      "invalid-argument",
      `${optionName} must be a number of microseconds from 0 to ${MAX_SPIN_MICROSECONDS}, got ${value}`,
      { option: optionName },
    );
  return value;
}

/** How often the machine's load is read again (`/proc/loadavg`, a few µs a read). */
const LOAD_SAMPLE_MS = 25;
const cores = availableParallelism();
let sampledAt = Number.NEGATIVE_INFINITY;
let coreFree = true;

/**
 * Whether polling can pay now: a core is free for it. A thread that polls on a machine with more runnable threads
 * than cores takes a core from another session's run, and two that poll on one core take turns by time slices:
 * measured at a load of 10–13 on 2 cores, polling made a sync call take 0.5–0.9 ms instead of 60 µs. So it polls
 * only while the one-minute load average is below the number of cores and Linux's count of runnable threads (read
 * at most every LOAD_SAMPLE_MS, this thread included) is not above it; elsewhere the load average alone decides.
 */
export function spinPays(): boolean {
  const now = performance.now();
  if (now - sampledAt < LOAD_SAMPLE_MS) return coreFree;
  sampledAt = now;
  coreFree = (loadavg()[0] ?? 0) < cores && runnableThreads() <= cores;
  return coreFree;
}

let loadFile: number | null | undefined;
const loadText = Buffer.allocUnsafe(128);

/** Runnable threads on the machine, this one included (`/proc/loadavg`'s fourth field: "0.52 0.58 0.59 2/467 …"). */
function runnableThreads(): number {
  if (loadFile === null) return 0;
  try {
    loadFile ??= openSync("/proc/loadavg", "r");
    const length = readSync(loadFile, loadText, 0, loadText.length, 0);
    const running = Number.parseInt(loadText.toString("latin1", 0, length).split(" ")[3] ?? "", 10);
    if (Number.isFinite(running)) return running;
  } catch {
    loadFile = null;
  }
  return 0;
}

/**
 * Keeps this thread's event loop polling (a chain of `setImmediate`, so libuv polls without sleeping) until
 * `awake(...)` was last called longer ago than its window. A reply or a host call that arrives meanwhile is seen
 * at once instead of after a sleeping thread's wake-up (tens of µs on an idle machine). Idle, it stops: no
 * immediate is queued and no CPU is spent; on a machine without a free core it does not start (`spinPays`).
 */
export class EventLoopAwake {
  readonly #pays: () => boolean;
  #until = 0;
  #spinning = false;
  #turns = 0;

  /** `pays` says whether polling can pay now (default: a core is free, `spinPays`). */
  constructor(pays: () => boolean = spinPays) {
    this.#pays = pays;
  }

  /** Whether the loop is kept polling now. */
  get spinning(): boolean {
    return this.#spinning;
  }

  /** How many turns of the loop it has kept polling since this process started (for tests and benches). */
  get turns(): number {
    return this.#turns;
  }

  /** Keeps the loop polling for `microseconds` from now (0: does nothing). */
  awake(microseconds: number): void {
    if (microseconds <= 0) return;
    const until = performance.now() + microseconds / 1000;
    if (until > this.#until) this.#until = until;
    if (this.#spinning || !this.#pays()) return;
    this.#spinning = true;
    setImmediate(this.#turn);
  }

  readonly #turn = (): void => {
    this.#turns++;
    if (performance.now() < this.#until && this.#pays()) setImmediate(this.#turn);
    else this.#spinning = false;
  };
}

/** The one loop keeper of this thread: every driver and session of the thread extends the same window. */
export const eventLoopAwake = new EventLoopAwake();
