import type { Container } from "../../container/index.ts";
import type { CompiledModule } from "../module/index.ts";
import type { SandboxDriver } from "../sandbox/index.ts";
import type {
  CallPolicy,
  ExecuteRequest,
  Execution,
  ExecutionLimits,
  MossContext,
  TracePayloads,
  TypeCheckMode,
} from "../types.ts";
import type { MossRuntime } from "./moss-runtime.ts";

/** Options the compiler passes to the runtime it builds. */
export interface MossRuntimeOptions {
  module: CompiledModule;
  container: Container;
  locals: Record<string, unknown>;
  context?: MossContext;
  typeCheck?: TypeCheckMode;
  limits?: Partial<ExecutionLimits>;
  /** `process` (default): isolates in supervised child processes; `in-process`; or a driver of your own. */
  sandbox?: "process" | "in-process" | SandboxDriver;
  /** Warnings of the compile that built this runtime (binding conflicts). */
  compileWarnings?: readonly string[];
  /** Decide each host call from model code (the compiler's `policy()`, then the module's `__moss_policy__`). */
  policies?: readonly CallPolicy[];
  /** Signs continuations of paused runs (HMAC-SHA256); default: a random key of this process. */
  continuationKey?: string | Uint8Array;
  /** How long a continuation can be resumed. Default one hour. */
  continuationTtlMs?: number;
  /**
   * Whether runs can pause for approvals and questions (default true). When false, a call that needs a decision is
   * denied (`ApprovalDenied`) instead of pausing; the call trace is kept either way.
   */
  durableRuns?: boolean;
  /**
   * Whether `execution.calls` keeps each call's arguments, result and error (bounded; see `HostCallRecord.args`), and
   * the redactor they pass first. Default false: the trace holds sizes only.
   */
  tracePayloads?: TracePayloads;
}

/** Options of `runtime.resume()`. */
export interface ResumeOptions {
  /** Overrides any limit for the resumed run. */
  limits?: Partial<ExecutionLimits>;
  /** Stops the resumed run when it aborts (see `ExecuteRequest.signal`). */
  signal?: AbortSignal;
}

/** A module's `__moss_exec__`: wraps each execute and resume of its runtimes (`next` runs it). */
export type ExecHook = (
  runtime: MossRuntime,
  request: ExecuteRequest,
  next: (request: ExecuteRequest) => Promise<Execution>,
) => Promise<Execution>;
