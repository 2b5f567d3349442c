import type { SandboxRunResult } from "./sandbox.ts";

/** The result of a run that never reached model code's end because the sandbox itself failed (kind `crash`). */
export function crashResult(message: string, name = "SandboxError"): SandboxRunResult {
  return {
    ok: false,
    stdout: "",
    warnings: [],
    hostCalls: 0,
    cpuTimeMs: 0,
    error: { kind: "crash", name, message },
  };
}
