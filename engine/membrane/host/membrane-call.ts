import {
  CALL_SITE_OUTSIDE,
  CALL_SITE_UNREADABLE,
  type HostCallBridge,
  type HostMembrane,
  type HostOperation,
  type HostOutcome,
} from "../protocol.ts";
import { hostErrorWire } from "./host-error.ts";

/**
 * One host call as the host half handles it: the operation a proxy asked for on a handle (member null: the handle
 * itself), its wire-encoded arguments, where in the run's script it was made and the clock and random values the run
 * read before it. The isolate's bridge (`HostCallBridge`) and the pipe of a sandbox process carry the same fields
 * positionally (`BatchedCall`); `hostCallOf` and `batchedCallOf` convert at those edges.
 */
export interface HostCall {
  operation: HostOperation;
  handle: number;
  member: string | null;
  /** Wire-encoded arguments (`[question, options]` for `ask`, `[image]` for `show`). */
  args: string;
  /** The call site, `line * CALL_SITE_COLUMNS + column` (0: unknown; `CALL_SITE_OUTSIDE`, `CALL_SITE_UNREADABLE`). */
  line: number;
  /** The clock and random values the run read since its previous host call (JSON); "" or absent when none. */
  nondeterminism?: string;
}

/** One call of a batch (`HostBatchBridge`) as it crosses: the arguments of `HostCallBridge`, in its order. */
export type BatchedCall = Parameters<HostCallBridge>;

/** The record of a call the bridge made positionally (its nondeterminism "" when it gave none). */
export function hostCallOf(call: BatchedCall): HostCall {
  const [operation, handle, member, args, line, nondeterminism] = call;
  return {
    operation,
    handle,
    member,
    args,
    line,
    nondeterminism: typeof nondeterminism === "string" ? nondeterminism : "",
  };
}

/** A call as a batch carries it across a pipe (`HostBatchBridge`'s order). */
export function batchedCallOf(call: HostCall): BatchedCall {
  return [call.operation, call.handle, call.member, call.args, call.line, call.nondeterminism ?? ""];
}

/** Dispatches one proxy access to the membrane; a membrane that throws becomes an error outcome. */
export function callMembrane(membrane: HostMembrane, call: HostCall): HostOutcome {
  const { operation, handle, member, args, nondeterminism } = call;
  // The line comes from the isolate (or a sandbox process): only a plain call site (or a known reason) is passed on.
  const given = call.line;
  const line =
    Number.isSafeInteger(given) &&
    (given > 0 || given === CALL_SITE_OUTSIDE || given === CALL_SITE_UNREADABLE)
      ? given
      : 0;
  try {
    if (typeof nondeterminism === "string" && nondeterminism !== "") membrane.readValues?.(nondeterminism);
    if (operation === "construct") return membrane.construct(handle, args, line);
    if (operation === "get") return membrane.get(handle, member ?? "", line);
    if (operation === "ask") {
      if (membrane.ask === undefined) throw new TypeError("moss.ask is not available in this run");
      return membrane.ask(args, line);
    }
    if (operation === "show") {
      if (membrane.show === undefined) throw new TypeError("moss.show is not available in this run");
      return membrane.show(args, line);
    }
    return membrane.call(handle, member, args, line);
  } catch (error) {
    return { kind: "error", wire: hostErrorWire(error) };
  }
}

/**
 * Answers a batch's calls in order, each by `answer` as if it were made alone, and stops after an outcome that ends
 * the run's calls (refused, paused): the calls after it are not made (model code sees them fail as it would have).
 */
export function answerInOrder(
  calls: readonly HostCall[],
  answer: (call: HostCall) => HostOutcome,
): HostOutcome[] {
  const outcomes: HostOutcome[] = [];
  for (const call of calls) {
    const outcome = answer(call);
    outcomes.push(outcome);
    if (outcome.kind === "refuse" || outcome.kind === "pause") break;
  }
  return outcomes;
}

/** The calls of a batch's JSON text, each checked for its shape; throws for anything else. */
export function parseBatch(text: string): HostCall[] {
  return checkBatch(JSON.parse(text));
}

/** A batch that crossed a pipe, each call checked for its shape; throws a TypeError for anything else. */
export function checkBatch(parsed: unknown): HostCall[] {
  if (!Array.isArray(parsed)) throw new TypeError("invalid host call batch");
  for (const call of parsed) {
    if (
      !Array.isArray(call) ||
      call.length !== 6 ||
      typeof call[0] !== "string" ||
      typeof call[1] !== "number" ||
      (call[2] !== null && typeof call[2] !== "string") ||
      typeof call[3] !== "string" ||
      typeof call[4] !== "number" ||
      typeof call[5] !== "string"
    )
      throw new TypeError("invalid host call batch");
  }
  return (parsed as BatchedCall[]).map(hostCallOf);
}
