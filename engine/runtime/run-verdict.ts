import { codeFrame, MossError } from "../errors.ts";
import { redactHostPaths } from "../membrane/index.ts";
import type { SandboxRunResult } from "../sandbox/index.ts";
import type { Execution, ExecutionError, MossContext } from "../types.ts";
import { mapStack, type PreparedSnippet } from "./prepare-snippet.ts";
import type { RunLog } from "./run-log.ts";

/*
 * What a run's end makes of it: kept as a pause, refused as a pause it cannot keep, or ended (with the fault of its
 * code, or of its replay), and each fault as the `ExecutionError` the caller reads.
 */

/** A fault the sandbox reported. */
type SandboxError = NonNullable<SandboxRunResult["error"]>;

/**
 * How a run ended: `paused` (it waits for a person and can be resumed), `unkept` (it waits for a person but left its
 * log, or outgrew it: it cannot be resumed, and fails as it is), or `ended` (with `error` when it failed; `diverged`
 * when it left its log, so nothing of it may be kept).
 */
export type RunVerdict =
  | { kind: "paused" }
  | { kind: "unkept"; error: ExecutionError; diverged: boolean }
  | { kind: "ended"; error: SandboxError | undefined; diverged: boolean };

/** The verdict on a run from what the sandbox reported and what its log saw. */
export function runVerdict(result: SandboxRunResult, runLog: RunLog): RunVerdict {
  if (result.paused && result.error === undefined) {
    if (runLog.diverged !== undefined) {
      const error: ExecutionError = { kind: "replay-diverged", name: "Error", message: runLog.diverged };
      return { kind: "unkept", error, diverged: true };
    }
    if (runLog.overflowed !== undefined) {
      const error: ExecutionError = { kind: "output-limit", name: "RangeError", message: runLog.overflowed };
      return { kind: "unkept", error, diverged: false };
    }
    if (runLog.requests.length > 0) return { kind: "paused" };
  }
  let error = result.error;
  if (error === undefined && runLog.diverged !== undefined) {
    // The run left its log where no later call noticed (a call run again answered otherwise): nothing is kept.
    error = { kind: "replay-diverged", name: "Error", message: runLog.diverged };
  } else if (error === undefined && result.ok && !runLog.replayComplete) {
    error = {
      kind: "replay-diverged",
      name: "Error",
      message: `the resumed run ended before its log did: it never made call ${runLog.callCount + 1} (${runLog.firstMissed}); its effects were not kept`,
    };
  }
  return { kind: "ended", error, diverged: error?.kind === "replay-diverged" };
}

/** Why the host could not take a run's return value or data back. */
export function decodeFailure(error: unknown): ExecutionError {
  return MossError.is(error, "wire-limit")
    ? {
        kind: "output-limit",
        name: "RangeError",
        message: `the return value cannot be sent back: ${error.message}`,
      }
    : {
        kind: "runtime",
        name: "TypeError",
        message: `the sandbox returned a malformed result: ${(error as Error).message}`,
      };
}

/** A fault of a run, located in the model's code (its stack mapped back from the compiled script). */
export function runtimeError(error: SandboxError, prepared: PreparedSnippet, code: string): ExecutionError {
  const mapped = mapStack(error.stack, prepared.map);
  // Faults of the sandbox machinery (a crash reports the sandbox process's stderr) may name host files; the model's
  // own errors are its text, and host errors were cleaned when they crossed the membrane.
  const message = error.kind === "runtime" ? error.message : redactHostPaths(error.message);
  const located: ExecutionError = { kind: error.kind, name: error.name, message };
  if (mapped.stack) located.stack = mapped.stack;
  if (mapped.line !== undefined && mapped.column !== undefined) {
    located.line = mapped.line;
    located.column = mapped.column;
    located.frame = codeFrame(code, mapped.line, mapped.column, 0);
  }
  return located;
}

/**
 * The execution a caller gets, with `context`: the context is replaced, never changed in place, so its copy (a ~1 MB
 * field costs ~20 ms) is made only when `execution.context` is read.
 */
export function execution(
  partial: Omit<Execution, "context" | "durationMs" | "warnings">,
  context: MossContext,
  warnings: string[],
  started: number,
): Execution {
  let copy: MossContext | undefined;
  const made = { ...partial, warnings } as Execution;
  Object.defineProperty(made, "context", {
    enumerable: true,
    configurable: true,
    get: () => {
      copy ??= structuredClone(context);
      return copy;
    },
    set: (value: MossContext) => {
      copy = value;
    },
  });
  made.durationMs = performance.now() - started;
  return made;
}
