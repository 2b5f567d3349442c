import type { SandboxRunResult } from "./sandbox.ts";

/** A run that ended before model code's end, with nothing of it returned. */
function endedResult(error: NonNullable<SandboxRunResult["error"]>): SandboxRunResult {
  return { ok: false, stdout: "", warnings: [], hostCalls: 0, cpuTimeMs: 0, error };
}

/** The result of a run that never reached model code's end because the sandbox itself failed (kind `crash`). */
export function crashResult(message: string, name = "SandboxError"): SandboxRunResult {
  return endedResult({ kind: "crash", name, message });
}

/** The result of a run stopped from outside before it started or ended (its signal aborted: kind `aborted`). */
export function abortedResult(message: string): SandboxRunResult {
  return endedResult({ kind: "aborted", name: "AbortError", message });
}
