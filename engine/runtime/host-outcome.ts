import { MossError } from "../errors.ts";
import { type HostOutcome, hostErrorWire, type SettledOutcome } from "../membrane/index.ts";
import type { LogEntry } from "./log-entry.ts";

/*
 * The outcomes the run log answers a host call with when it does not run it as it is: a logged result replayed, an
 * error for a call that did not run (the run stopped, its journal failed), a call started once its journal stored it.
 */

/** Applies `next` to a value now, or once a promise of it settles. */
export function thenOrNow<T, U>(value: T | Promise<T>, next: (value: T) => U): U | Promise<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}

/** What a host promise settles to for an outcome decided later (a wait becomes `pending`: never delivered). */
export function settledOf(outcome: HostOutcome): SettledOutcome | Promise<SettledOutcome> {
  if (outcome.kind === "value" || outcome.kind === "error") return outcome;
  if (outcome.kind === "promise") return outcome.settled;
  if (outcome.kind === "refuse") return { kind: "error", wire: hostErrorWire(new Error(outcome.message)) };
  return { kind: "pending" };
}

/** Runs a call whose start was journaled first: what it answers, as a host promise settles (a throw is its error). */
export function runNow(run: () => HostOutcome): () => SettledOutcome | Promise<SettledOutcome> {
  return () => {
    try {
      return settledOf(run());
    } catch (error) {
      return { kind: "error", wire: hostErrorWire(error) };
    }
  };
}

/** Why a stopped run's call did not run. */
export function stoppedError(signal: AbortSignal): MossError {
  const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? "aborted");
  return new MossError("run-stopped", `the run was stopped (${reason}): this call did not run`, {});
}

/** A call whose "started" the journal could not store: it did not run (a takeover would not know it may have). */
export function journalError(error: unknown): MossError {
  const message = error instanceof Error ? error.message : String(error);
  return new MossError(
    "run-stopped",
    `the run's checkpoint could not be stored (${message}): this call did not run`,
    {},
  );
}

/** A call that did not run, answering with `error` (at once, or as a host promise settles). */
export function errorOutcome(error: Error): { kind: "error"; wire: string } {
  return { kind: "error", wire: hostErrorWire(error) };
}

/** A logged result, answered the way the call was first answered (at once, or through a promise). */
export function replayedOutcome(result: NonNullable<LogEntry["result"]>): HostOutcome {
  if (result.kind === "value" || result.kind === "error") return { kind: result.kind, wire: result.wire };
  const kind = result.kind === "promise-value" ? "value" : "error";
  return { kind: "promise", settled: Promise.resolve({ kind, wire: result.wire }) };
}
