/*
 * The membrane's one vocabulary: the operations model code can ask of the host, their outcomes, the shapes of the
 * handles host objects cross as, and the envelope a run ends with. The host half (runtime/, sandbox drivers) and the
 * isolate half (isolate/) use these names; the pipe between a sandbox process and its parent carries them too.
 * Values inside travel as wire text (wire/).
 */

/** The operations a proxy inside the isolate can request of the host. */
export type HostOperation = "call" | "construct" | "get" | "ask" | "show";

/** The operations that name a handle (`ask` and `show` are `moss`'s own). */
export type HandleOperation = Extract<HostOperation, "call" | "construct" | "get">;

/**
 * The host-call bridge the isolate half is started with: one operation on a handle (member null: the handle itself),
 * its wire-encoded arguments, the call site (`line * CALL_SITE_COLUMNS + column`) and the clock and random values
 * read since the previous call (JSON, "" when none); returns the reply's wire text.
 */
export type HostCallBridge = (
  operation: HostOperation,
  handle: number,
  member: string | null,
  args: string,
  line: number,
  nondeterminism: string,
) => string;

/**
 * The batch bridge the isolate half is started with: the calls of `asyncMethods` model code made in one microtask
 * turn, in program order, as a JSON array of `[operation, handle, member, args, line, nondeterminism]` (the
 * arguments of `HostCallBridge`); returns a JSON array of their replies' wire text, in the same order. The host stops
 * at a reply that ends the run's calls (a limit, a refused or paused call): the calls after it get no reply and fail
 * with that reply's message, as if each had been made alone.
 */
export type HostBatchBridge = (calls: string) => string;

/** The operations host code can make of a function or class handle it was handed (a callback). */
export type CallbackOperation = Extract<HostOperation, "call" | "construct">;

/** What a handle is: `function` callable (and maybe has members), `object` members only, `class` `new` only. */
export type HandleKind = "function" | "object" | "class";

/** Shape of a host value the isolate may reach: the isolate builds a proxy from it. */
export interface HandleShape {
  /** Membrane-assigned id; calls name it. */
  id: number;
  /** `function`: callable (and maybe has members); `object`: members only; `class`: callable with `new` only. */
  kind: HandleKind;
  /** Public method names callable through the proxy. */
  methods: string[];
  /** Public property names readable through the proxy (each read is a host call). */
  properties: string[];
  /**
   * Of `methods`, those declared to return a Promise: the isolate sends their calls made in one microtask turn
   * together (`HostBatchBridge`), before any other host call, and hands model code a promise at once.
   */
  asyncMethods?: string[];
}

/**
 * How a host promise ends: a value or an error, or `pending` when what it waited for turned into a wait for a
 * person's decision (a policy that answered later with "ask"): the isolate's promise then never settles.
 */
export type SettledOutcome = { kind: "value" | "error"; wire: string } | { kind: "pending" };

/** The outcome of one host call, as the membrane reports it to the driver. */
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

/** A call site no frame of the run's own script made (code evaluated at run time, an earlier run's function alone). */
export const CALL_SITE_OUTSIDE = -1;
/** A call site whose frames could not be read: the call was made while a stack trace was being formatted. */
export const CALL_SITE_UNREADABLE = -2;

/**
 * The global the compiled snippet calls first (a line of its own, after its directives): the isolate learns there
 * which script is the run's own, so a frame of any other script (eval'd code that names itself `snippet.js`) never
 * gives a call's line. Model code calling it later changes nothing.
 */
export const CALL_SITE_PROBE = "__moss_call_site__";

/** Why a call site (0 or below) has no line: what an approval request says instead of guessing one. */
export function unknownCallSiteReason(site: number): string {
  if (site === CALL_SITE_UNREADABLE)
    return "the call was made while a stack trace was being formatted, where its frames cannot be read";
  if (site === CALL_SITE_OUTSIDE)
    return "no line of this run's code made the call (it came from code evaluated at run time or from an earlier run's function)";
  return "the call's line could not be read";
}

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

/** The host's answer to a call as it crosses a pipe: a promise outcome names the promise settled later. */
export type CallReply = Exclude<HostOutcome, { kind: "promise" }> | { kind: "promise"; promiseId: number };

/** The JSON envelope a run hands back from the isolate. */
export interface SandboxEnvelope {
  ok: boolean;
  returns?: string;
  mossData?: string;
  error?: {
    kind: "runtime" | "output-limit" | "call-limit" | "replay-diverged";
    name: string;
    message: string;
    stack?: string;
  };
  warnings: string[];
}

/** Marker line appended when a run's stdout exceeds its byte limit. */
export function stdoutTruncationMarker(limitBytes: number): string {
  return `… [stdout truncated: limit of ${limitBytes} bytes reached]`;
}
