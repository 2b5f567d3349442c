import { MossError } from "../errors.ts";
import type { HostMembrane } from "../membrane/index.ts";
import type { ExecutionErrorKind, ExecutionLimits } from "../types.ts";

export {
  CALL_SITE_COLUMNS,
  callSiteOf,
  type HandleShape,
  type HostMembrane,
  type HostOutcome,
  type SettledOutcome,
} from "../membrane/index.ts";

/*
 * The sandbox contract. Implementations: an isolated-vm driver running isolates in a supervised pool
 * of child processes (the default), and an in-process isolated-vm driver (faster, no crash containment).
 * Only `isolated-vm.ts` loads `isolated-vm`; only `isolate-session.ts` and `bootstrap-entry.ts` use it.
 *
 * Values cross the boundary as strings in the wire encoding of `membrane/wire/` (a typed JSON encoding where
 * Date, Map, Set, bigint, undefined, NaN/Infinity and -0 survive, and host objects appear as handles).
 */

/** The clock and random values a run read inside the isolate, in order: logged for a resume to replay. */
export interface Nondeterminism {
  clock: number[];
  random: number[];
}

/** Everything the isolate sees besides the model's code: installed once per session (and again after a rebuild). */
export interface SessionSetup {
  /** Wire-encoded record name -> value for the module's visible top-level names and `withLocals`. Handles become proxies. */
  globals: string;
  /** Wire-encoded record of `moss` data fields (plain values living in the isolate). */
  mossData: string;
  /** Service fields of `moss`: field name -> wire-encoded handle (or undefined for an absent optional service). */
  mossServices: string;
  /** Names of data fields to snapshot after every execute. */
  dataFields: string[];
  /**
   * The session's kept definitions (functions, classes, literal constants of earlier snippets) as one classic
   * script, evaluated after the names and `moss` are installed: a rebuilt session has what the checker knows.
   */
  definitions?: string;
}

/** A session's setup, or what makes it from the runtime's data as they are when called (it may need to compile). */
export type SessionSetupSource = SessionSetup | (() => SessionSetup | Promise<SessionSetup>);

/** The setup a source gives now. */
export function setupOf(source: SessionSetupSource): SessionSetup | Promise<SessionSetup> {
  return typeof source === "function" ? source() : source;
}

/** Converts a byte limit to isolated-vm's `memoryLimit` in MiB (its minimum is 8): an isolate's limit, fixed when it is made. */
export function memoryLimitMebibytes(bytes: number): number {
  return Math.max(8, Math.ceil(bytes / (1024 * 1024)));
}

/**
 * The refusal of a run whose memory limit differs from its session's isolate when the session cannot be rebuilt (it
 * was opened with a fixed setup, not a function): never a run under another limit than the one it asked for.
 */
export function memoryLimitRefusal(sessionMebibytes: number, requestBytes: number): MossError {
  return new MossError(
    "invalid-argument",
    `the run asks for a memory limit of ${memoryLimitMebibytes(requestBytes)} MiB (memoryLimitBytes), but its session's isolate was made with ${sessionMebibytes} MiB and cannot be rebuilt (it was opened with a fixed setup): open a new session with that limit`,
    { memoryLimitBytes: requestBytes, sessionMemoryLimitMebibytes: sessionMebibytes },
  );
}

/** One execution inside a session. */
export interface SandboxRunRequest {
  /** Classic-script JavaScript (already compiled from the model's TypeScript); its top-level declarations persist. */
  script: string;
  /** File name used in stack traces (the runtime maps frames of this file back to the snippet). */
  filename: string;
  /** Function looked up on the context's global object after the script ran. */
  target: string;
  /** Arguments: `{ local: name }` refers to an isolate global (e.g. `moss`), `{ wire }` is a copied value. */
  args: Array<{ local: string } | { wire: string }>;
  limits: ExecutionLimits;
  /** Values the isolate's clock and `Math.random` return first (a resumed run replays its log's). */
  replay?: Nondeterminism;
}

/** The result of one execution, data only. */
export interface SandboxRunResult {
  ok: boolean;
  /** Wire-encoded return value of the awaited target (when ok). */
  returns?: string;
  /** Wire-encoded snapshot of the data fields, taken after the run even when it failed (absent after a crash/timeout). */
  mossData?: string;
  /** Captured output lines in order, already capped (the last line is the truncation marker when cut). */
  stdout: string;
  error?: { kind: ExecutionErrorKind; name: string; message: string; stack?: string };
  /** E.g. "moss.callback is a function and was not persisted". */
  warnings: string[];
  /** Host calls made during this run. */
  hostCalls: number;
  /** The run paused: a host call waits for a decision and nothing else could happen. The isolate was discarded. */
  paused?: boolean;
  /** The clock and random values the run read (set when it paused). */
  nondeterminism?: Nondeterminism;
  cpuTimeMs: number;
}

/** One isolate + context, owned by one runtime. */
export interface SandboxSession {
  /** False once the isolate died (timeout, memory, crash); the runtime then opens a new session. */
  readonly alive: boolean;
  run(request: SandboxRunRequest): Promise<SandboxRunResult>;
  /**
   * Ends the session's run in flight (or waiting to start) at once, with kind `aborted` and `message`: its isolate is
   * discarded as after a timeout, and the runtime opens the session anew from its persisted context. No run: nothing.
   */
  stop?(message: string): void;
  dispose(): Promise<void>;
}

/** A pool of isolates (in child processes, or in this process). */
export interface SandboxDriver {
  readonly name: "process" | "in-process";
  /**
   * Opens a session. Given a function, the driver may call it again to rebuild the session elsewhere before a run
   * (from the runtime's data as they are then): the process driver moves a waiting run off a busy process so.
   */
  open(setup: SessionSetupSource, membrane: HostMembrane, limits: ExecutionLimits): Promise<SandboxSession>;
  /**
   * Starts what the first open needs (a sandbox process, a warm isolate) now, if nothing is started yet; resolves
   * once it is ready.
   */
  prestart?(): Promise<void>;
  close(): Promise<void>;
}
