import type { SandboxEnvelope } from "../membrane/index.ts";
import { WIRE_TEXT_SLACK } from "../membrane/index.ts";
import type { ActiveRun, Failure } from "./active-run.ts";
import type { SandboxRunResult } from "./sandbox.ts";

/*
 * A run's result as it leaves the isolate session: the envelope the isolate handed back (or the failure the host
 * saw) with what model code wrote in it bounded (error texts, warnings, the stack cut to the run's own frames, the
 * wire text in transit within the result limit).
 */

/** An envelope from the isolate, or one the session made for a failure it saw (a limit, a crash, a pause). */
export type RunEnvelope = Omit<SandboxEnvelope, "error"> & { error?: Failure & { stack?: string } };

/** The run's result from its envelope, bounded; `cpuTimeMs` is the CPU time the run took. */
export function runResult(run: ActiveRun, envelope: RunEnvelope, cpuTimeMs: number): SandboxRunResult {
  const result: SandboxRunResult = {
    ok: envelope.ok === true,
    stdout: run.stdout.join(""),
    warnings: boundedWarnings(envelope.warnings),
    hostCalls: Math.min(run.hostCalls, run.limits.maxHostCalls),
    cpuTimeMs,
  };
  if (envelope.returns !== undefined) result.returns = envelope.returns;
  if (envelope.mossData !== undefined) result.mossData = envelope.mossData;
  if (envelope.error === undefined && run.unhandled !== undefined) {
    result.ok = false;
    delete result.returns;
    envelope = { ...envelope, error: { kind: "runtime", ...run.unhandled } };
  }
  if (envelope.error !== undefined) {
    const { kind, name, message, stack } = envelope.error;
    // Error text comes from model code: bounded so it cannot carry more than a result may.
    result.error = {
      kind,
      name: boundedText(name, MAX_ERROR_NAME),
      message: boundedText(message, MAX_ERROR_MESSAGE),
    };
    const filtered =
      typeof stack === "string" ? filterStack(boundedText(stack, MAX_ERROR_STACK), run.filename) : undefined;
    if (filtered !== undefined) result.error.stack = filtered;
  }
  // The isolate bounds the expanded value and the runtime checks it again before decoding; here only the text
  // in transit is bounded (wire text runs up to WIRE_TEXT_SLACK times the expanded size: indices, tags, base64).
  const returnsBytes = result.returns === undefined ? 0 : result.returns.length;
  const dataBytes = result.mossData === undefined ? 0 : result.mossData.length;
  const maxTextLength = WIRE_TEXT_SLACK * run.limits.maxResultBytes;
  if (returnsBytes + dataBytes > maxTextLength) {
    result.ok = false;
    delete result.returns;
    if (dataBytes > maxTextLength) delete result.mossData;
    result.error = {
      kind: "output-limit",
      name: "RangeError",
      message: `the result (return value plus moss data) exceeds the limit of ${run.limits.maxResultBytes} bytes`,
    };
  }
  return result;
}

const MAX_ERROR_NAME = 200;
const MAX_ERROR_MESSAGE = 8 * 1024;
const MAX_ERROR_STACK = 16 * 1024;
const MAX_WARNINGS = 50;
const MAX_WARNING_BYTES = 16 * 1024;

/** Text from model code cut to `max` characters with a visible marker. */
function boundedText(value: unknown, max: number): string {
  const text = typeof value === "string" ? value : String(value ?? "");
  return text.length <= max ? text : `${text.slice(0, max)}… [${text.length - max} more characters]`;
}

/** Warnings are produced inside the isolate, so model code decides how many: keep a readable, bounded list. */
function boundedWarnings(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  const warnings: string[] = [];
  let bytes = 0;
  for (const item of value) {
    if (typeof item !== "string") continue;
    if (warnings.length >= MAX_WARNINGS || bytes + item.length > MAX_WARNING_BYTES) {
      warnings.push(`… and ${value.length - warnings.length} more warnings`);
      break;
    }
    warnings.push(boundedText(item, 1024));
    bytes += item.length;
  }
  return warnings;
}

/** Keeps the header of a V8 stack and only the frames located in `filename`. */
export function filterStack(stack: string, filename: string): string | undefined {
  const lines = stack.split("\n");
  const kept: string[] = [];
  let header = true;
  for (const line of lines) {
    const isFrame = /^\s+at /.test(line);
    if (!isFrame) {
      if (header) kept.push(line);
      continue;
    }
    header = false;
    if (line.includes(`(${filename}:`) || line.includes(`at ${filename}:`)) kept.push(line);
  }
  return kept.length === 0 ? undefined : kept.join("\n");
}
