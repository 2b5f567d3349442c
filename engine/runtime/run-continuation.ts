import { MossError } from "../errors.ts";
import type { Nondeterminism } from "../sandbox/index.ts";
import type { Answers, ExecuteRequest, ExecutionLimits, PendingRequest } from "../types.ts";
import { type ContinuationPayload, MAX_CONTINUATION_RESULTS, signContinuation } from "./continuation.ts";
import type { LogEntry } from "./log-entry.ts";
import type { PreparedSnippet } from "./prepare-snippet.ts";
import type { RunPlan } from "./run-plan.ts";
import type { ResumeOptions } from "./runtime-options.ts";

/*
 * A run's continuation, made the one way for its two uses: a paused run's (its log, the requests it waits for) and
 * a checkpoint's (the run so far, waiting for nothing: a runtime elsewhere takes it over if this process dies); and
 * taken back, as the run a resume runs.
 */

/** Whose continuations a runtime signs: its module, the module's source hash and the session; and how. */
export interface ContinuationOwner {
  module: string;
  moduleHash: string;
  session: string;
  key: Uint8Array;
  ttlMs: number;
}

/** What a run adds to its plan in its continuation: its log so far, the values it read, what it waits for. */
export interface RunSoFar {
  log: LogEntry[];
  nondeterminism: Nondeterminism;
  requests: PendingRequest[];
}

/**
 * The signed continuation of a run; `{ tooLarge, message }` when its payload passes `MAX_CONTINUATION_RESULTS` times
 * the run's `maxResultBytes`.
 */
export function signRun(
  owner: ContinuationOwner,
  plan: RunPlan,
  run: RunSoFar,
): { text: string } | { tooLarge: number; message: string } {
  const now = Date.now();
  const payload: ContinuationPayload = {
    v: 1,
    module: owner.module,
    moduleHash: owner.moduleHash,
    session: owner.session,
    code: plan.code,
    target: plan.target,
    args: plan.args,
    localArgs: plan.localArgs,
    log: run.log,
    nondeterminism: run.nondeterminism,
    data: plan.dataBefore,
    requests: run.requests,
    requestTag: plan.requestTag,
    issuedAt: now,
    expiresAt: now + owner.ttlMs,
  };
  const maxPayloadBytes = MAX_CONTINUATION_RESULTS * plan.limits.maxResultBytes;
  const signed = signContinuation(payload, owner.key, maxPayloadBytes);
  if (!("tooLarge" in signed)) return signed;
  return {
    tooLarge: signed.tooLarge,
    message: `the paused run cannot be kept: its continuation (the log of host calls, the clock and random values read, the code and data) is ${signed.tooLarge} bytes, more than ${MAX_CONTINUATION_RESULTS} x maxResultBytes (${maxPayloadBytes})`,
  };
}

/**
 * Tells each checkpoint listener a checkpoint (see `MossRuntime.onCheckpoint`): resolves once the promises they
 * returned resolved, rejects when one of them rejected (the journal could not store it); undefined when none
 * returned one. A listener that throws is warned of, and does not stop the others.
 */
export function tellCheckpoint(
  listeners: Iterable<(checkpoint: string) => unknown>,
  checkpoint: string,
): Promise<unknown> | undefined {
  const waits: Promise<unknown>[] = [];
  for (const listener of listeners) {
    try {
      const returned = listener(checkpoint);
      if (returned instanceof Promise) waits.push(returned);
    } catch (error) {
      process.emitWarning(`a checkpoint listener threw: ${(error as Error).message}`);
    }
  }
  return waits.length === 0 ? undefined : Promise.all(waits);
}

/** The clock and random log a sandbox reported, as plain numbers (a sandbox process is not trusted). */
export function plainNondeterminism(given: unknown): Nondeterminism {
  const numbers = (value: unknown) =>
    Array.isArray(value)
      ? value.filter((item): item is number => typeof item === "number").slice(0, 1_000_000)
      : [];
  const record = (given ?? {}) as { clock?: unknown; random?: unknown };
  return { clock: numbers(record.clock), random: numbers(record.random) };
}

/** The request a resumed run goes through `__moss_exec__` as: the continuation's code, target and local arguments. */
export function resumedRequest(payload: ContinuationPayload, options: ResumeOptions): ExecuteRequest {
  return {
    code: payload.code,
    target: payload.target,
    localArgs: [...payload.localArgs],
    resumed: true,
    ...(options.limits === undefined ? {} : { limits: { ...options.limits } }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  };
}

/** Refuses a resumed run's request that `__moss_exec__` changed: a resumed run runs the code the person approved. */
export function assertResumedAsPaused(request: ExecuteRequest, payload: ContinuationPayload): void {
  if (
    request.code !== payload.code ||
    (request.target ?? "main") !== payload.target ||
    request.args !== undefined ||
    (request.localArgs !== undefined && request.localArgs.join("\0") !== payload.localArgs.join("\0"))
  ) {
    throw new MossError(
      "invalid-argument",
      "__moss_exec__ changed the code, target or arguments of a resumed run: a resumed run runs the code the person approved",
      {},
    );
  }
}

/** The run a resume runs: the paused run again, from its start, against its log and with the person's answers. */
export function resumedPlan(
  payload: ContinuationPayload,
  prepared: PreparedSnippet,
  answers: Answers,
  limits: ExecutionLimits,
  signal: AbortSignal | undefined,
): RunPlan {
  return {
    code: payload.code,
    prepared,
    target: payload.target,
    args: payload.args,
    localArgs: payload.localArgs,
    limits,
    replay: payload.log,
    nondeterminism: payload.nondeterminism,
    answers,
    dataBefore: payload.data,
    ...(signal === undefined ? {} : { signal }),
    requestTag: payload.requestTag ?? "",
  };
}
