/** Kinds of failure an execution can report; never thrown, always returned in `Execution.error`. */
export type ExecutionErrorKind =
  | "syntax"
  | "type"
  | "runtime"
  | "timeout"
  | "memory"
  | "output-limit"
  | "call-limit"
  | "crash";

/** A fault of the model's code, with line/column relative to the model's snippet (1-based). */
export interface ExecutionError {
  kind: ExecutionErrorKind;
  name: string;
  message: string;
  line?: number;
  column?: number;
  /** Only frames of the model's snippet, as `at fn (snippet.ts:line:col)`. */
  stack?: string;
  /** The snippet line with a caret, when a line is known. */
  frame?: string;
  /** Type diagnostics when kind is `type` (or `syntax` found by the checker). */
  diagnostics?: Diagnostic[];
}

/** A type-check finding about the model's snippet; line and column are 1-based within the snippet. */
export interface Diagnostic {
  /** TypeScript error code (e.g. 2551), or a moss-ts code >= 90000 for moss-specific findings. */
  code: number;
  message: string;
  line: number;
  column: number;
  severity: "error" | "warning";
  /** The snippet line with a caret under the column. */
  frame?: string;
}

/** How type errors in the model's code are treated. */
export type TypeCheckMode = "strict" | "warn" | "off";

/** Resource limits of one execution; all configurable per runtime and per request. */
export interface ExecutionLimits {
  /** Wall-clock time of the whole run, including awaited host calls. */
  wallTimeMs: number;
  /** CPU time spent inside the isolate. */
  cpuTimeMs: number;
  /** Isolate heap limit. */
  memoryLimitBytes: number;
  /** Bytes of captured stdout per execution before truncation ends the run. */
  maxStdoutBytes: number;
  /** Host calls (through the membrane) per execution. */
  maxHostCalls: number;
  /** Bytes of the serialized return value plus data-field snapshot. */
  maxResultBytes: number;
  /** Time one type-check of the model's code may take (in its worker, once the module's types are loaded). */
  typeCheckTimeoutMs?: number;
  /** Heap of the type-check worker; takes effect when the runtime starts its worker. */
  typeCheckMemoryBytes?: number;
}

export const DEFAULT_LIMITS: Readonly<ExecutionLimits> = Object.freeze({
  wallTimeMs: 10_000,
  cpuTimeMs: 5_000,
  memoryLimitBytes: 128 * 1024 * 1024,
  maxStdoutBytes: 64 * 1024,
  maxHostCalls: 10_000,
  maxResultBytes: 8 * 1024 * 1024,
  typeCheckTimeoutMs: 10_000,
  typeCheckMemoryBytes: 512 * 1024 * 1024,
});

/** What `MossRuntime.execute` takes. */
export interface ExecuteRequest {
  /** The model's TypeScript; markdown fences are stripped. */
  code: string;
  /** Name of the function to call after the code is evaluated. Default `main`. */
  target?: string;
  /** Extra arguments, copied into the sandbox, passed after the `localArgs`. */
  args?: unknown[];
  /** Names of runtime locals passed positionally first; default `["moss"]` when the target takes a parameter. */
  localArgs?: string[];
  /** Overrides the runtime's wall-clock limit for this execution. */
  timeoutMs?: number;
  /** Overrides any limit for this execution. */
  limits?: Partial<ExecutionLimits>;
  /** Overrides the runtime's type-check mode for this execution. */
  typeCheck?: TypeCheckMode;
}

/** The outcome of one execution: faults of the model's code come back here, never as exceptions. */
export interface Execution {
  ok: boolean;
  /** The target's return value (awaited), copied out of the sandbox. */
  returns: unknown;
  /** Everything logged during this execution, in order. */
  stdout: string;
  error?: ExecutionError;
  /** Non-fatal findings: type diagnostics in `warn` mode, non-persistable fields, truncations. */
  warnings: string[];
  /** The MossContext after this execution (already persisted into the runtime). */
  context: MossContext;
  durationMs: number;
}

/** The persisted state of a session: the PyContext of GhostOS. */
export interface MossContext {
  version: 1;
  /** The module's path (as given to compile) or name. */
  module: string;
  /** Replaces the module file's source on the next compile (the self-modification channel). */
  code?: string;
  /** Data fields of `moss`, in the typed JSON encoding (superjson). */
  properties: Record<string, unknown>;
  /** Code to execute after the next compile (kept for protocol parity). */
  executeCode?: string;
  /** Whether `executeCode` has been executed. */
  executed: boolean;
}
