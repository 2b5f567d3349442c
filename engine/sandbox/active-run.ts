import type { ExecutionErrorKind, ExecutionLimits } from "../types.ts";

/*
 * The state of one run in an isolate session, from its start to its result: its limits and clocks, the calls it
 * made, the host promises and waits it holds, its entries into the isolate, and how it failed. `IsolateSession` owns
 * the one in flight; the rules about a run's end that need no isolate live here.
 */

/** How a run failed: the kind of `ExecutionError`, its name and message. */
export type Failure = { kind: ExecutionErrorKind; name: string; message: string };

/** What `finish` receives when the run paused instead of delivering an envelope. */
export const PAUSED = Symbol("paused");

/** What the run's watchdog race yields once the run was aborted. */
export const ABORTED = Symbol("aborted");

/** Thrown out of a run's awaits once it was aborted (a limit, a stop, a dispose): carries why. */
export class RunAborted extends Error {
  constructor(readonly failure: Failure) {
    super(failure.message);
  }
}

/** The message isolated-vm gives an entry that ran past its `timeout`. */
export const TIMED_OUT = "Script execution timed out.";

export interface ActiveRun {
  readonly limits: ExecutionLimits;
  readonly filename: string;
  readonly startedAt: number;
  readonly cpuStart: bigint;
  hostCalls: number;
  lastCpuMs: number;
  readonly stdout: string[];
  ended: boolean;
  finish?: (envelope: string | typeof PAUSED) => void;
  /** Host calls waiting for a decision (their isolate promises never settle in this run). */
  waiting: number;
  /** Host promises whose settlement has not entered the isolate yet. */
  outstanding: number;
  /** Settlements waiting for their one entry into the isolate (`[promiseId, tag, wire]`), in the order they came. */
  settlements: Array<[number, "v" | "e", string]>;
  /** The envelope `done` delivered; the run finishes once no entry into the isolate is still in flight. */
  envelope?: string;
  /** Entries into the isolate (the script, promise settlements) not yet returned: their microtasks belong to the run. */
  inFlight: number;
  /** The first rejected promise of model code that nothing handled (isolated-vm reports it as the entry's error). */
  unhandled?: { name: string; message: string };
  failure?: Failure;
  abort(failure: Failure): void;
  readonly aborted: Promise<Failure>;
}

/**
 * A run starting now; `kill` discards the isolate when the run is aborted (the first failure wins, later ones are
 * ignored).
 */
export function startRun(
  limits: ExecutionLimits,
  filename: string,
  cpuStart: bigint,
  kill: () => void,
): ActiveRun {
  let abort!: (failure: Failure) => void;
  const aborted = new Promise<Failure>((resolve) => {
    abort = resolve;
  });
  const run: ActiveRun = {
    limits,
    filename,
    startedAt: performance.now(),
    cpuStart,
    hostCalls: 0,
    inFlight: 0,
    waiting: 0,
    outstanding: 0,
    settlements: [],
    lastCpuMs: 0,
    stdout: [],
    ended: false,
    aborted,
    abort: (failure) => {
      if (run.failure !== undefined) return;
      run.failure = failure;
      kill();
      abort(failure);
    },
  };
  return run;
}

/** Why a run that made too many host calls failed. */
export function callLimitMessage(limits: ExecutionLimits): string {
  return `the run exceeded its limit of ${limits.maxHostCalls} host calls`;
}

/** How often the watchdog checks a run's wall and CPU time. */
export function pollIntervalMs(limits: ExecutionLimits): number {
  return Math.min(50, Math.max(5, Math.floor(Math.min(limits.wallTimeMs, limits.cpuTimeMs) / 20)));
}

export function timeoutFailure(message: string): Failure {
  return { kind: "timeout", name: "TimeoutError", message };
}
