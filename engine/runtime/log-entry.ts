import { randomBytes } from "node:crypto";
import type { PendingRequest } from "../types.ts";

/*
 * The run log's records: one host call as the log (and a continuation) keeps it, the ids of the requests a run
 * makes, and the error model code sees for a denied call.
 */

/** One host call of a run, in call order, as a continuation carries it. */
export interface LogEntry {
  /** What was called: `service.member`, a function's name, `ask`; reads end in ` (read)`. */
  key: string;
  /** The wire-encoded arguments, as the isolate sent them. */
  args: string;
  /** What the called handle denotes (see `RunLog`): a replayed call must act on the same thing. */
  on?: string;
  /** What each handle in `args` denotes, in order: a replayed call must be given the same things. */
  handles?: string[];
  /** The result: `value`/`error` answered at once, `promise-value`/`promise-error` through a promise. */
  result?: { kind: "value" | "error" | "promise-value" | "promise-error"; wire: string; handles: boolean };
  /** The request the call waited for (still waiting when `result` is absent). */
  request?: PendingRequest;
  /** The runtime that ran the call: its handles (host objects in the result) exist only there. */
  origin?: string;
  /**
   * The call had been dispatched to the host and had no result yet when the checkpoint was taken: it may have run.
   * A takeover runs it again only when its member is declared `@idempotent`; any other waits for a person's yes.
   */
  started?: true;
}

/** A denied call: model code sees an `Error` named `ApprovalDenied` with `reason` and `member`. */
export class ApprovalDenied extends Error {
  static readonly mossErrorFields = ["reason", "member"];
  override readonly name = "ApprovalDenied";
  readonly code = "approval-denied";
  constructor(
    readonly member: string,
    readonly reason: string,
  ) {
    super(`${member} was not approved: ${reason}`);
  }
}

/**
 * The id of the request call `index` of a run makes: `r<call>-<tag>`, the tag being 12 hex digits drawn at random
 * when the run first starts and kept in its continuation and checkpoints (a resumed or taken-over run names its
 * requests as before). So an id names one request of one run: another run, a later step, a server's next run of
 * the thread, each draws its own tag, and an answer given for one of them answers nothing else. A continuation made
 * before tags (no tag) keeps the bare `r<call>`.
 */
export function requestId(index: number, tag: string): string {
  return tag === "" ? `r${index + 1}` : `r${index + 1}-${tag}`;
}

/** A fresh tag for {@link requestId}: 48 random bits, as 12 hex digits. */
export function newRequestTag(): string {
  return randomBytes(6).toString("hex");
}
