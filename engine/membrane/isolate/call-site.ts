import { CALL_SITE_COLUMNS, CALL_SITE_OUTSIDE, CALL_SITE_PROBE, CALL_SITE_UNREADABLE } from "../protocol.ts";
import {
  ErrorCtor,
  ObjectCreate,
  ObjectDefineProperties,
  ObjectDefineProperty,
  ObjectFreeze,
  ObjectGetOwnPropertyDescriptor,
  ObjectHasOwn,
  ReflectApply,
  ReflectDefineProperty,
  ReflectGetOwnPropertyDescriptor,
  ReflectGetPrototypeOf,
  ReflectOwnKeys,
  StringCtor,
  TypeErrorCtor,
  WeakMapCtor,
  WeakMapGet,
  WeakMapSet,
} from "../wire/intrinsics.ts";

/*
 * Where model code calls the host, read from what model code cannot shape: V8's structured call sites (the CallSite
 * API), taken by `Error.captureStackTrace` as captured when the script was evaluated, with a prepareStackTrace of this file's own
 * that model code cannot replace and a stack limit set for that capture, through CallSite methods captured before
 * model code ran. A frame counts only when it belongs to the run's own script, known by its script hash (learnt by
 * the probe the compiled snippet calls first): a method named `snippet.js:2:1`, a prepareStackTrace of model code,
 * eval'd code that names itself `snippet.js`, or an earlier run's function never gives a line. When no frame of the
 * run's script can be read, the site says why (CALL_SITE_OUTSIDE, CALL_SITE_UNREADABLE); it never guesses.
 *
 * V8 reads `Error.prepareStackTrace` with a plain [[Get]] (an accessor runs) but `Error.stackTraceLimit` only as a
 * data property: so prepareStackTrace becomes an accessor of this file (model code still sets and reads its own
 * value), and stackTraceLimit stays a writable data property model code may set but never make read-only.
 */

/** The frames of one capture, as V8 hands them to prepareStackTrace; read only through the methods taken here. */
export type CallSiteFrames = readonly object[];

/** A host call's site: `line * CALL_SITE_COLUMNS + column` in the run's script, or a reason (0 and below). */
export interface CallSite {
  at: number;
  /** The frames of the capture, kept for the stack of a later rejection; undefined when they could not be read. */
  frames: CallSiteFrames | undefined;
}

/** A caller deeper than this (other scripts' frames, built-ins) has no line. */
const DEEP_FRAMES = 256;

const proxyTargets = new WeakMapCtor<object, object>();

/** lockdown.ts tells this file the target of every Proxy model code makes (a proxy of Error is Error here). */
export function noteProxyTarget(proxy: object, target: unknown): void {
  if ((typeof target === "object" || typeof target === "function") && target !== null)
    ReflectApply(WeakMapSet, proxyTargets, [proxy, target]);
}

function unwrapped(value: unknown): unknown {
  let current = value;
  for (let depth = 0; depth < 100_000; depth++) {
    if ((typeof current !== "object" && typeof current !== "function") || current === null) return current;
    const target = ReflectApply(WeakMapGet, proxyTargets, [current]);
    if (target === undefined) return current;
    current = target;
  }
  return current;
}

let capturing = false;
let captured: CallSiteFrames | undefined;
let awaitingProbe = false;
let runScriptHash: string | undefined;
let CallSiteScriptHash: Function | undefined;
let CallSiteLineNumber: Function | undefined;
let CallSiteColumnNumber: Function | undefined;
let CallSiteToString: Function | undefined;
const ErrorCaptureStackTrace = (ErrorCtor as any).captureStackTrace as (
  target: object,
  skip?: Function,
) => void;

// The prepareStackTrace of a capture here: keeps the frames V8 built; nothing of model code runs.
const keepFrames = (_error: unknown, frames: CallSiteFrames): string => {
  captured = frames;
  return "";
};

/**
 * The frames above `skip`'s topmost call, at most `limit`: undefined when V8 formats a stack already (a host call
 * made inside model code's prepareStackTrace), where it calls no prepareStackTrace again.
 */
function capture(limit: number, skip: Function): CallSiteFrames | undefined {
  const holder: { stack?: unknown } = ObjectCreate(null);
  const error = ErrorCtor as any;
  const before = error.stackTraceLimit;
  captured = undefined;
  error.stackTraceLimit = limit;
  capturing = true;
  try {
    ErrorCaptureStackTrace(holder, skip);
    void holder.stack;
  } finally {
    capturing = false;
    error.stackTraceLimit = before;
  }
  const frames = captured;
  captured = undefined;
  return frames;
}

function hashOf(frame: object): unknown {
  return CallSiteScriptHash === undefined ? undefined : ReflectApply(CallSiteScriptHash, frame, []);
}

/** The site of the first frame of the run's script, or CALL_SITE_OUTSIDE. */
function siteIn(frames: CallSiteFrames): number {
  if (runScriptHash === undefined || runScriptHash === "") return CALL_SITE_OUTSIDE;
  for (let i = 0; i < frames.length; i++) {
    const frame = frames[i]!;
    if (hashOf(frame) !== runScriptHash) continue;
    const line = ReflectApply(CallSiteLineNumber!, frame, []);
    const column = ReflectApply(CallSiteColumnNumber!, frame, []);
    if (typeof line !== "number" || line < 1) return CALL_SITE_OUTSIDE;
    return (
      line * CALL_SITE_COLUMNS +
      (typeof column === "number" && column > 0 && column < CALL_SITE_COLUMNS ? column : 0)
    );
  }
  return CALL_SITE_OUTSIDE;
}

/**
 * The one call site of a host call (every operation: call, construct, get, ask, show): `skip` is the isolate's
 * function whose frames are left out (`callHost`); `frames` are taken first (a caller deeper is looked for in up to
 * DEEP_FRAMES).
 */
export function callSite(skip: Function, frames: number): CallSite {
  let taken = capture(frames, skip);
  if (taken === undefined)
    return { __proto__: null, at: CALL_SITE_UNREADABLE, frames: undefined } as CallSite;
  let at = siteIn(taken);
  if (at === CALL_SITE_OUTSIDE && taken.length >= frames && frames < DEEP_FRAMES) {
    const deeper = capture(DEEP_FRAMES, skip);
    if (deeper !== undefined) {
      taken = deeper;
      at = siteIn(deeper);
    }
  }
  return { __proto__: null, at, frames: taken } as CallSite;
}

/** The frames as V8 prints them by default (`\n    at …` each): the stack of a host promise's rejection. */
export function formatFrames(frames: CallSiteFrames): string {
  let text = "";
  for (let i = 0; i < frames.length; i++)
    text += `\n    at ${StringCtor(ReflectApply(CallSiteToString!, frames[i], []))}`;
  return text;
}

/** The run's script is evaluated next: its first statement, the probe, names it. */
export function expectRunScript(): void {
  awaitingProbe = true;
  runScriptHash = undefined;
}

function probe(): void {
  if (!awaitingProbe) return;
  awaitingProbe = false;
  const frames = capture(1, probe);
  const hash = frames !== undefined && frames.length > 0 ? hashOf(frames[0]!) : undefined;
  runScriptHash = typeof hash === "string" && hash !== "" ? hash : undefined;
}

function refuseReadOnlyLimit(): never {
  throw new TypeErrorCtor(
    "Cannot redefine property: stackTraceLimit (the sandbox keeps Error.stackTraceLimit a writable number property)",
  );
}

/** In the order ToPropertyDescriptor reads them; 0, 1 and 3 are flags. */
const DESCRIPTOR_FIELDS = ObjectFreeze(["enumerable", "configurable", "value", "writable", "get", "set"]);

/** A descriptor read once, as ToPropertyDescriptor reads it, so model getters on it run once. */
function descriptorCopy(value: unknown): PropertyDescriptor {
  if ((typeof value !== "object" && typeof value !== "function") || value === null)
    throw new TypeErrorCtor("Property description must be an object");
  const source = value as any;
  const copy: any = ObjectCreate(null);
  for (let i = 0; i < DESCRIPTOR_FIELDS.length; i++) {
    const field = DESCRIPTOR_FIELDS[i]!;
    if (field in source) copy[field] = i < 2 || i === 3 ? !!source[field] : source[field];
  }
  return copy;
}

const makesReadOnly = (descriptor: PropertyDescriptor): boolean =>
  ObjectHasOwn(descriptor, "writable") && descriptor.writable === false;

const isLimitOfError = (target: unknown, key: PropertyKey): boolean =>
  key === "stackTraceLimit" && unwrapped(target) === ErrorCtor;

const propertyKey = (key: unknown): PropertyKey => (typeof key === "symbol" ? key : StringCtor(key));

function replaceMethod(owner: object, name: string, method: Function): void {
  ReflectDefineProperty(owner, name, {
    __proto__: null,
    value: method,
    writable: true,
    enumerable: false,
    configurable: true,
  } as PropertyDescriptor);
}

/**
 * Before model code runs: takes the CallSite methods, makes `Error.prepareStackTrace` an accessor of this file,
 * keeps `Error.stackTraceLimit` a writable data property (the definers refuse to make it read-only) and installs the
 * probe as a read-only global.
 */
export function hardenCallSites(global: any): void {
  const error = ErrorCtor as any;
  const initialPrepare = error.prepareStackTrace;
  error.prepareStackTrace = (_error: unknown, frames: CallSiteFrames) => frames;
  const holder: { stack?: CallSiteFrames } = ObjectCreate(null);
  ErrorCaptureStackTrace(holder);
  const sample = holder.stack;
  error.prepareStackTrace = initialPrepare;
  const prototype =
    sample !== undefined && sample.length > 0 ? (ReflectGetPrototypeOf(sample[0]!) as any) : undefined;
  if (prototype !== undefined && prototype !== null) {
    CallSiteScriptHash = typeof prototype.getScriptHash === "function" ? prototype.getScriptHash : undefined;
    CallSiteLineNumber = prototype.getLineNumber;
    CallSiteColumnNumber = prototype.getColumnNumber;
    CallSiteToString = prototype.toString;
  }

  let modelPrepare: unknown = initialPrepare;
  ReflectDefineProperty(error, "prepareStackTrace", {
    __proto__: null,
    get: function prepareStackTrace() {
      return capturing ? keepFrames : modelPrepare;
    },
    set: function prepareStackTrace(value: unknown) {
      modelPrepare = value;
    },
    enumerable: false,
    configurable: false,
  } as PropertyDescriptor);
  const limit = ObjectGetOwnPropertyDescriptor(error, "stackTraceLimit");
  ReflectDefineProperty(error, "stackTraceLimit", {
    __proto__: null,
    value: typeof limit?.value === "number" ? limit.value : 10,
    writable: true,
    enumerable: limit?.enumerable ?? true,
    configurable: false,
  } as PropertyDescriptor);

  // Every way to make a property read-only, for Error's stackTraceLimit (directly or through a proxy of Error).
  replaceMethod(
    Object,
    "defineProperty",
    function defineProperty(target: object, key: PropertyKey, attributes: PropertyDescriptor) {
      const name = propertyKey(key);
      if (!isLimitOfError(target, name)) return ObjectDefineProperty(target, name, attributes);
      const copy = descriptorCopy(attributes);
      if (makesReadOnly(copy)) refuseReadOnlyLimit();
      return ObjectDefineProperty(target, name, copy);
    },
  );
  replaceMethod(
    Reflect,
    "defineProperty",
    function defineProperty(target: object, key: PropertyKey, attributes: PropertyDescriptor) {
      const name = propertyKey(key);
      if (!isLimitOfError(target, name)) return ReflectDefineProperty(target, name, attributes);
      const copy = descriptorCopy(attributes);
      if (makesReadOnly(copy)) return false;
      return ReflectDefineProperty(target, name, copy);
    },
  );
  replaceMethod(
    Object,
    "defineProperties",
    function defineProperties(target: object, properties: PropertyDescriptorMap) {
      if (unwrapped(target) !== ErrorCtor) return ObjectDefineProperties(target, properties);
      // As the standard does: every descriptor read first (once), then each defined in turn.
      if ((typeof properties !== "object" && typeof properties !== "function") || properties === null)
        return ObjectDefineProperties(target, properties);
      const source = properties as any;
      const copies: any = ObjectCreate(null);
      const keys = ReflectOwnKeys(source);
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        const own = ReflectGetOwnPropertyDescriptor(source, key);
        if (own === undefined || !own.enumerable) continue;
        const copy = descriptorCopy(source[key]);
        if (key === "stackTraceLimit" && makesReadOnly(copy)) refuseReadOnlyLimit();
        copies[key] = copy;
      }
      return ObjectDefineProperties(target, copies);
    },
  );
  replaceMethod(Object, "freeze", function freeze<T>(value: T): T {
    if (unwrapped(value) === ErrorCtor)
      throw new TypeErrorCtor(
        "Cannot freeze Error: the sandbox keeps Error.stackTraceLimit a writable number property",
      );
    return ObjectFreeze(value);
  });

  ReflectDefineProperty(global, CALL_SITE_PROBE, {
    __proto__: null,
    value: ObjectFreeze(probe),
    writable: false,
    enumerable: false,
    configurable: false,
  } as PropertyDescriptor);
}
