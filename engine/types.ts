/** Kinds of failure an execution can report; never thrown, always returned in `Execution.error`. */
export type ExecutionErrorKind =
  | "syntax"
  | "type"
  | "runtime"
  | "timeout"
  | "memory"
  | "output-limit"
  | "call-limit"
  | "crash"
  /** A resumed run took another path than its log (another call, other arguments): nothing after it ran. */
  | "replay-diverged"
  /**
   * The run was stopped from outside before it ended (its `ExecuteRequest.signal` aborted: a cancel, or a server
   * worker that lost the run): the sandbox ended it at once.
   */
  | "aborted";

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
  /** Set on the request `__moss_exec__` sees for a `resume()`: its code, target and arguments cannot change. */
  resumed?: boolean;
  /**
   * Stops the run when it aborts: no host call starts after (each fails with MossError `run-stopped`), and the
   * calls in flight see `currentRunSignal()` abort.
   */
  signal?: AbortSignal;
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
  /**
   * Set when the run paused for decisions (`ok` is false and there is no `error`): the requests a person must
   * answer and the continuation to pass to `runtime.resume()` with the answers. Nothing of a paused run persisted.
   */
  pending?: PendingRun;
  /**
   * One entry per host call the run made (replayed ones included), in call order: sizes, and the payloads only when
   * the runtime keeps them (`tracePayloads`).
   */
  calls: HostCallRecord[];
  /** Images the code passed to `moss.show(image)`, in order (absent when none): the agent shows them to the model. */
  images?: ImageContent[];
}

/** An image in the conversation (the conversation tree's ImageContent): its bytes (base64) or a URL. */
export interface ImageContent {
  /** `image/png`, `image/jpeg`, `image/gif` or `image/webp`. */
  mediaType: string;
  /** The bytes, base64-encoded (when there is no `url`). */
  data?: string;
  /** An http(s) URL of the image (when there is no `data`). */
  url?: string;
  /** How closely a vision model looks at it (`auto` when absent). */
  detail?: "low" | "high" | "auto";
  /** A name for people, e.g. the file name. */
  name?: string;
}

/** An image as a caller gives it: like {@link ImageContent}, with the bytes as a Uint8Array (a Buffer) or base64. */
export type ImageInput = Omit<ImageContent, "data"> & { data?: Uint8Array | string };

/** What a paused run waits for. */
export interface PendingRun {
  /** Every request the run issued before it could go no further (siblings of one `Promise.all` together). */
  requests: PendingRequest[];
  /** Signed, expiring: resumes the run (here or in another process) with `runtime.resume(continuation, answers)`. */
  continuation: string;
}

/** A decision a paused run waits for: approve a host call, or answer a question the code asked. */
export type PendingRequest = ApprovalRequest | ClarificationRequest;

interface RequestSite {
  /**
   * `r<call>-<tag>`: the call's number in its run and the run's random tag, so it names this one request of this one
   * run (stable across its pauses and takeovers, never reused by another run); the key of its answer.
   */
  id: string;
  /** 1-based line of the model's code that made the call, when known. */
  line?: number;
  /**
   * The lines of the model's code around `line` (a code frame), when known: the line marked `>`, with a caret under
   * the member called when its column is known.
   */
  code?: string;
  /** Why `line` is absent: the sandbox could not tell which line made the call (it never guesses one). */
  lineUnknown?: string;
}

/** A host call that needs a person's yes: `@approval` on its declaration, or the policy said "ask". */
export interface ApprovalRequest extends RequestSite {
  kind: "approval";
  /** The service (the `moss` field or module name) the call reaches, e.g. `robot`; absent for a bare handle. */
  service?: string;
  /** The member called, e.g. `move` (or the function's name). */
  member: string;
  /**
   * What the call acts on: the `moss` field or visible name (`moss.bank: Bank`), or the call of this run that
   * returned the object (`Account returned by call 1 (bank.account)`).
   */
  target?: string;
  /** The call's arguments as data; a host object is described as `target` is, in brackets. */
  args: unknown[];
  /**
   * The member's parameter names in declaration order, as the context module declares them (a rest parameter as
   * `...name`, a destructured one as written), so a person reads `todos.remove(id: 3)`; absent when undeclared.
   */
  parameters?: string[];
  /** The member's doc comment as the module declares it (its text, then its tags), at most 2 KiB; absent when none. */
  doc?: string;
  /** For each argument that is itself a host object (a handle), what it is, as `target` describes one, by index. */
  handles?: Record<number, string>;
  /**
   * Why it waits: the declaration's `@approval` tag, the host's policy, or `in-doubt`: the call had started when the
   * worker running the run died, so it may have run; a person decides whether it runs again (a yes runs it again, a
   * no makes it fail with `ApprovalDenied`). A member declared `@idempotent` runs again without asking.
   */
  reason: "tag" | "policy" | "in-doubt";
}

/** A question the model's code asked with `moss.ask(question, { choices })`. */
export interface ClarificationRequest extends RequestSite {
  kind: "clarification";
  question: string;
  choices?: string[];
}

/** A person's answer to one request: approve or deny a call, or answer a question. */
export type Answer = { approved: true } | { approved: false; reason?: string } | { answer: string };

/** Answers by request id. */
export type Answers = Record<string, Answer>;

/** What a call policy sees of one host call from model code. */
export interface PolicyCall {
  /** The service (the `moss` field or visible module name) the call reaches, when known. */
  service: string | undefined;
  /** The member called (or the function's name for a module function). */
  member: string;
  /** The arguments as data; a host object is described by what it is (see `ApprovalRequest.args`). */
  args: unknown[];
  /** What the call acts on, as `ApprovalRequest.target` describes it. */
  target?: string;
  /** 1-based line of the model's code, when known. */
  line: number | undefined;
}

/** A policy's decision on one call. */
export type PolicyVerdict = "allow" | "deny" | "ask";

/**
 * Decides a host call: run it, refuse it (the code sees an `ApprovalDenied` error), or pause for a person. A promise
 * is awaited; anything but a verdict (undefined, another value, a throw, a rejection) denies, with a warning.
 */
export type CallPolicy = (call: PolicyCall) => PolicyVerdict | Promise<PolicyVerdict>;

/** One host call of a run, as traced in `execution.calls`. */
export interface HostCallRecord {
  /** `service.member` (or the member alone), e.g. `robot.move`; `ask` for `moss.ask`. */
  member: string;
  /** 1-based line of the model's code that made the call, when known. */
  line?: number;
  /** Why `line` is absent, as `ApprovalRequest.lineUnknown` says it. */
  lineUnknown?: string;
  /** `value`/`error`: ran on the host; `replayed`: answered from the run's log; `denied`; `pending`: waits. */
  outcome: "value" | "error" | "replayed" | "denied" | "pending";
  /** Time on the host until the result was known (0 for replayed and pending calls). */
  durationMs: number;
  /** Bytes of the wire-encoded arguments. */
  argsBytes: number;
  /** Bytes of the wire-encoded result or error (absent while pending). */
  resultBytes?: number;
  /**
   * The arguments, as a JSON array (host objects as what they denote, in brackets), kept only when the runtime is
   * asked to (`tracePayloads`): redacted by the host's redactor and cut at 1,024 characters, a cut one ending with
   * `… (truncated, <n> bytes)`.
   */
  args?: string;
  /** The result of outcome `value` (or of a replayed value), kept and bounded as {@link args} is. */
  result?: string;
  /** The error of outcome `error` or `denied` (or of a replayed error), as `Name: message`, bounded as {@link args}. */
  error?: string;
  /** A person's answer to the call's approval request, when one decided it in this execution. */
  approval?: "approved" | "denied";
}

/**
 * Whether `execution.calls` keeps each call's arguments and result (bounded, see `HostCallRecord.args`): `true`, or
 * the host's redactor every payload passes before it is cut. Default `false`: sizes only.
 */
export type TracePayloads = boolean | { redact?: (text: string) => string };

/** The persisted state of a session: the PyContext of GhostOS. */
export interface MossContext {
  /** 1: properties are superjson documents; 2: they may be wire documents `{ wire }` (the membrane's encoding). */
  version: 1 | 2;
  /**
   * The session's stable identity: a continuation resumes only in a runtime of the context it was made for. Made
   * when absent (documents written before it load and get one).
   */
  id?: string;
  /** The module's path (as given to compile) or name. */
  module: string;
  /** Replaces the module file's source on the next compile (the self-modification channel). */
  code?: string;
  /** Data fields of `moss`, each one document: `{ wire }` (the membrane's wire text) or, from version 1, superjson. */
  properties: Record<string, unknown>;
  /** Code to execute after the next compile (kept for protocol parity). */
  executeCode?: string;
  /** Whether `executeCode` has been executed. */
  executed: boolean;
  /**
   * The session's kept definitions (TypeScript source of the top-level functions, classes, literal constants and
   * types its snippets defined): a runtime made from this context has them in its checker and its sandbox alike.
   */
  definitions?: string;
}
