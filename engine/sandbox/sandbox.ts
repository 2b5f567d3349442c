import type { ExecutionErrorKind, ExecutionLimits } from "../types.ts";

/*
 * The sandbox contract. Implementations: an isolated-vm driver running isolates in a supervised pool
 * of child processes (the default), and an in-process isolated-vm driver (faster, no crash containment).
 * Only `isolated-vm-driver`/the sandbox process entry import `isolated-vm`.
 *
 * Values cross the boundary as strings in the wire encoding of `wire.ts` (a typed JSON encoding where
 * Date, Map, Set, bigint, undefined, NaN/Infinity and -0 survive, and host objects appear as handles).
 */

/** Shape of a host value the isolate may reach: the isolate builds a proxy from it. */
export interface HandleShape {
  /** Membrane-assigned id; calls name it. */
  id: number;
  /** `function`: callable (and maybe has members); `object`: members only; `class`: callable with `new` only. */
  kind: "function" | "object" | "class";
  /** Public method names callable through the proxy. */
  methods: string[];
  /** Public property names readable through the proxy (each read is a host call). */
  properties: string[];
}

/** The outcome of one host call, as the membrane reports it to the driver. */
/**
 * How a host promise ends: a value or an error, or `pending` when what it waited for turned into a wait for a
 * person's decision (a policy that answered later with "ask"): the isolate's promise then never settles.
 */
export type SettledOutcome = { kind: "value" | "error"; wire: string } | { kind: "pending" };

export type HostOutcome =
  /** The host function returned synchronously: `wire` is the encoded value. */
  | { kind: "value"; wire: string }
  /** The host function threw synchronously: `wire` encodes `{ name, message }`. */
  | { kind: "error"; wire: string }
  /** The host function returned a Promise; it settles to a `value` or `error` outcome. */
  | { kind: "promise"; settled: Promise<SettledOutcome> }
  /**
   * The call waits for a decision the run does not have (an approval, an answer): the isolate gets a promise that
   * never settles, and the run pauses as soon as nothing else can happen.
   */
  | { kind: "pending" }
  /**
   * The call waits for a decision and its caller expects a plain value, not a Promise: the run stops at once (this
   * and every later host call fail in the isolate) and pauses; nothing after the call runs.
   */
  | { kind: "pause" }
  /** The call must not happen (a resumed run left its log): this and every later host call fail, the run ends so. */
  | { kind: "refuse"; failure: "replay-diverged"; message: string };

/** How a call site packs its column: `site = line * CALL_SITE_COLUMNS + column` (the bootstrap writes it so). */
export const CALL_SITE_COLUMNS = 65536;

/** The 1-based line and column (0: unknown) of a call site the sandbox reported. */
export function callSiteOf(site: number): { line: number; column: number } {
  if (!Number.isSafeInteger(site) || site <= 0) return { line: 0, column: 0 };
  return { line: Math.floor(site / CALL_SITE_COLUMNS), column: site % CALL_SITE_COLUMNS };
}

/** The host side of the membrane, implemented by the runtime; the driver calls it for every proxy access. */
export interface HostMembrane {
  /**
   * Calls `member` of the handle (or the handle itself when member is null); args are wire-encoded. `line` (every
   * operation has it) is the call site in the running script, `line * CALL_SITE_COLUMNS + column`, 0 when unknown.
   */
  call(handle: number, member: string | null, args: string, line?: number): HostOutcome;
  /** Constructs a class handle (`new Handle(...args)`). */
  construct(handle: number, args: string, line?: number): HostOutcome;
  /** Reads a public property of the handle. */
  get(handle: number, property: string, line?: number): HostOutcome;
  /** `moss.ask(question, options)`: args are the wire-encoded `[question, options]`. */
  ask?(args: string, line?: number): HostOutcome;
  /** `moss.show(image)`: args are the wire-encoded `[image]`; the image goes to the model with the run's outcome. */
  show?(args: string, line?: number): HostOutcome;
  /**
   * The clock and random values the run read since its previous host call (JSON `{ clock, random }`), told before
   * the call it came with: a checkpoint taken at a call holds every value read before it.
   */
  readValues?(nondeterminism: string): void;
}

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
}

/** A session's setup, or what makes it from the runtime's data as they are when called. */
export type SessionSetupSource = SessionSetup | (() => SessionSetup);

/** The setup a source gives now. */
export function setupOf(source: SessionSetupSource): SessionSetup {
  return typeof source === "function" ? source() : source;
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
  close(): Promise<void>;
}
