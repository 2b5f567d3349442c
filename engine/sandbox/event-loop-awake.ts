import { readFileSync } from "node:fs";
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

/** How often the machine's count of running threads is read again (`/proc/loadavg`, about 10 µs a read). */
const LOAD_SAMPLE_MS = 25;
const cores = availableParallelism();
let sampledAt = Number.NEGATIVE_INFINITY;
let coreFree = true;

/**
 * Whether polling can pay now: a core is free for it. A thread that polls on a machine with more runnable threads
 * than cores takes a core from another session's run and, having used its time slice, is scheduled late when its
 * reply comes (measured: 0.8 ms a call instead of 65 µs at a load of 12 on 2 cores). Linux's count of runnable
 * threads is read at most every LOAD_SAMPLE_MS; elsewhere the one-minute load average stands in.
 */
export function spinPays(): boolean {
  const now = performance.now();
  if (now - sampledAt < LOAD_SAMPLE_MS) return coreFree;
  sampledAt = now;
  coreFree = runnableThreads() <= cores;
  return coreFree;
}

function runnableThreads(): number {
  try {
    // "0.52 0.58 0.59 2/467 12345": the fourth field counts the runnable threads, this one included.
    const running = Number.parseInt(readFileSync("/proc/loadavg", "latin1").split(" ")[3] ?? "", 10);
    if (Number.isFinite(running)) return running;
  } catch {}
  return Math.ceil(loadavg()[0] ?? 0);
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
