import {
  type HostBatchBridge,
  type HostCallBridge,
  type HostOperation,
  type SandboxEnvelope,
  stdoutTruncationMarker,
} from "../protocol.ts";
import { isReachableName, MOSS_OWN_MEMBERS, type MossOwnMember } from "../visibility.ts";
import type { WireCodec } from "../wire/codec.ts";
import {
  ArrayIsArray,
  DateCtor,
  DateNow,
  DateToString,
  ErrorCtor,
  errorConstructors,
  FunctionBind,
  JSONParse,
  JSONStringify,
  MapClear,
  MapCtor,
  MapDelete,
  MapGet,
  MapSet,
  MathObject,
  MathRandom,
  NumberCtor,
  ObjectCreate,
  ObjectFreeze,
  ObjectHasOwn,
  ObjectKeys,
  ObjectLookupGetter,
  ObjectPrototype,
  ObjectToString,
  PromiseCtor,
  PromiseThen,
  ProxyCtor,
  ProxyRevocable,
  ReferenceErrorCtor,
  ReflectApply,
  ReflectDefineProperty,
  ReflectDeleteProperty,
  ReflectGet,
  ReflectGetOwnPropertyDescriptor,
  ReflectHas,
  ReflectSet,
  ReflectSetPrototypeOf,
  StringCtor,
  StringIncludesMethod,
  TypeErrorCtor,
  WeakMapGet,
  WeakMapSet,
  WeakSetAdd,
  WeakSetCtor,
  WeakSetHas,
} from "../wire/intrinsics.ts";
import { nullArray } from "../wire/values.ts";
import {
  type CallSiteFrames,
  callSite,
  expectRunScript,
  formatFrames,
  hardenCallSites,
  noteProxyTarget,
} from "./call-site.ts";
import { formatValues, inspect } from "./format.ts";
import { shapeOfProxy } from "./proxy-shapes.ts";
import { append, data, slice } from "./records.ts";
import { truncateToBytes, utf8Length } from "./stdout-text.ts";

/*
 * The isolate-side half of the membrane. `sandboxBootstrap` is never called on the host: it is bundled by esbuild
 * (membrane/isolate-script.ts) into the one classic script that runs inside the isolate (strict mode, before any
 * model code). It may import only isolate/, wire/, protocol.ts and visibility.ts (scripts/check-arrows.js checks);
 * pure jobs live in files of their own (records.ts, format.ts, stdout-text.ts, proxy-shapes.ts), and since the
 * script is evaluated once per isolate, their module state is per isolate like this closure's.
 * Everything it needs from the host arrives as arguments: the wire codec, `hostCall` (a synchronous bridge
 * that takes and returns strings only), `emit` (stdout text) and `done` (a run's envelope). Those bridges live
 * only in this closure; the function returns the entry points the host drives (`install`, `runScript`,
 * `settle`).
 *
 * Rule for this code: it runs beside model code that may patch any prototype, so it calls intrinsics captured
 * up front through `ReflectApply`, builds descriptors and records with null prototypes, and never hands an
 * internal object to a method looked up on a prototype.
 */

/** The entry points the bootstrap returns to the host (reached through isolated-vm references only). */
export interface SandboxEntryPoints {
  /** `definitions`: the session's kept definitions as a classic script, evaluated last (see `SessionSetup`). */
  install(
    globals: string,
    mossData: string,
    mossServices: string,
    dataFields: string,
    definitions: string,
  ): void;
  /** Resets the run's state, evaluates the script as a classic script and starts the target: one entry, one hop. */
  runScript(
    maxStdoutBytes: number,
    source: string,
    filename: string,
    target: string,
    argumentsJson: string,
    maxResultBytes: number,
    replayJson: string,
  ): void;
  settle(promiseId: number, tag: string, body: string): void;
  /** Settles several host promises in one entry: a JSON array of `[promiseId, tag, body]`, in order. */
  settleAll(settlements: string): void;
  /** The clock and random values the current run has read so far (JSON `{ clock, random }`): a paused run's log. */
  recorded(): string;
}

export function sandboxBootstrap(
  codec: WireCodec,
  hostCall: HostCallBridge,
  emit: (text: string) => void,
  done: (envelope: string) => void,
  hostCalls: HostBatchBridge,
): SandboxEntryPoints {
  const global = globalThis as any;
  // Called through this binding, eval is indirect: the code runs in global scope with classic-script semantics.
  // biome-ignore lint/security/noGlobalEval: evaluating the model's code inside the isolate is the point.
  const IndirectEval = eval;
  const StringIncludes = (text: string, part: string): boolean =>
    ReflectApply(StringIncludesMethod, text, [part]);
  const ErrorCaptureStackTrace = (Error as any).captureStackTrace as (target: object) => void;
  hardenCallSites(global);

  // WebAssembly memory and SharedArrayBuffer escape memoryLimit; Atomics.waitAsync, FinalizationRegistry and
  // WeakRef let model code schedule work the host would run after its run is over.
  for (const name of ["WebAssembly", "SharedArrayBuffer", "Atomics", "FinalizationRegistry", "WeakRef"]) {
    ReflectDeleteProperty(global, name);
  }
  // Growing a resizable ArrayBuffer commits memory that the isolate's memoryLimit does not count, and only Node 20
  // accepts --no-harmony-rab-gsab (never the in-process host): every buffer is fixed-size on every Node line. The
  // constructor drops its options argument (`{ maxByteLength }`), and nothing can resize or transfer a buffer.
  for (const name of ["resize", "transfer", "transferToFixedLength"]) {
    ReflectDeleteProperty(ArrayBuffer.prototype, name);
  }
  const ReflectConstruct = Reflect.construct;
  const FixedArrayBuffer = new Proxy(ArrayBuffer, {
    __proto__: null,
    construct: (target: Function, args: unknown[], newTarget: Function) =>
      ReflectConstruct(target, [args[0]], newTarget),
  } as ProxyHandler<ArrayBufferConstructor>);
  ReflectDefineProperty(ArrayBuffer.prototype, "constructor", {
    __proto__: null,
    value: FixedArrayBuffer,
    writable: true,
    enumerable: false,
    configurable: true,
  } as PropertyDescriptor);
  ReflectDefineProperty(global, "ArrayBuffer", {
    __proto__: null,
    value: FixedArrayBuffer,
    writable: true,
    enumerable: false,
    configurable: true,
  } as PropertyDescriptor);

  // Every Proxy model code makes is known: the data snapshot and the result never read one (its traps would run
  // model code while the session's data are saved, and could change a field already taken). `Proxy` becomes a
  // forwarding proxy of itself whose construct registers what it makes; `Proxy.revocable` registers too. No other
  // way to make a Proxy is left: the original constructor is reachable only through this closure.
  const modelProxies = new WeakSetCtor<object>();
  const isModelProxy = (value: object): boolean => ReflectApply(WeakSetHas, modelProxies, [value]) as boolean;
  ReflectDefineProperty(ProxyCtor, "revocable", {
    __proto__: null,
    value: function revocable(target: object, handler: ProxyHandler<object>) {
      const made = ProxyRevocable(target, handler);
      ReflectApply(WeakSetAdd, modelProxies, [made.proxy]);
      noteProxyTarget(made.proxy, target);
      return made;
    },
    writable: true,
    enumerable: false,
    configurable: true,
  } as PropertyDescriptor);
  ReflectDefineProperty(global, "Proxy", {
    __proto__: null,
    value: new ProxyCtor(ProxyCtor, {
      __proto__: null,
      construct: (target: Function, args: unknown[], _newTarget: Function) => {
        const made = ReflectConstruct(target, args);
        ReflectApply(WeakSetAdd, modelProxies, [made]);
        noteProxyTarget(made, args[0]);
        return made;
      },
    } as ProxyHandler<ProxyConstructor>),
    writable: true,
    enumerable: false,
    configurable: true,
  } as PropertyDescriptor);

  // ---- per-run state -------------------------------------------------------------------------------------
  let maxStdout = 65536;
  let stdoutBytes = 0;
  let stdoutClosed = false;
  // `paused`: a call that returns a plain value waits for a person; the isolate stops making host calls and the host
  // reports the run as paused (it never delivers this envelope's error).
  let limitHit: null | {
    kind: "output-limit" | "call-limit" | "replay-diverged" | "paused";
    message: string;
  } = null;
  const pending = new MapCtor<
    number,
    { resolve: (value: unknown) => void; reject: (error: unknown) => void; site?: CallSiteFrames }
  >();

  // ---- handles and proxies -------------------------------------------------------------------------------
  const proxyById = new MapCtor<number, object>();

  function seal(fn: Function): Function {
    ReflectDeleteProperty(fn, "name");
    ReflectDeleteProperty(fn, "length");
    ReflectSetPrototypeOf(fn, null);
    return ObjectFreeze(fn);
  }

  function makeProxy(shape: any): object {
    const known = ReflectApply(MapGet, proxyById, [shape.id]);
    if (known !== undefined) return known;
    const id = NumberCtor(shape.id);
    let target: any;
    if (shape.kind === "function") {
      target = (...args: unknown[]) => callHost("call", id, null, args);
    } else if (shape.kind === "class") {
      const construct = function (this: unknown, ...args: unknown[]) {
        if (new.target === undefined)
          throw new TypeErrorCtor("a host class constructor cannot be invoked without 'new'");
        const instance = callHost("construct", id, null, args);
        if ((typeof instance !== "object" && typeof instance !== "function") || instance === null) {
          throw new TypeErrorCtor("the host constructor did not return an object");
        }
        return instance;
      };
      target = ReflectApply(FunctionBind, construct, [null]);
    } else {
      target = ObjectCreate(null);
    }
    if (typeof target === "function") {
      ReflectDeleteProperty(target, "name");
      ReflectDeleteProperty(target, "length");
      ReflectSetPrototypeOf(target, null);
    }
    const methods = ArrayIsArray(shape.methods) ? shape.methods : [];
    const asyncMethods = new MapCtor<unknown, true>();
    const declaredAsync = ArrayIsArray(shape.asyncMethods) ? shape.asyncMethods : [];
    for (let i = 0; i < declaredAsync.length; i++)
      ReflectApply(MapSet, asyncMethods, [declaredAsync[i], true]);
    for (let i = 0; i < methods.length; i++) {
      const name = methods[i];
      if (!isReachableName(name)) continue;
      const batched = ReflectApply(MapGet, asyncMethods, [name]) === true;
      const method = seal((...args: unknown[]) => callHost("call", id, name, args, batched));
      ReflectDefineProperty(target, name, data(method));
    }
    const properties = ArrayIsArray(shape.properties) ? shape.properties : [];
    for (let i = 0; i < properties.length; i++) {
      const name = properties[i];
      if (!isReachableName(name)) continue;
      const getter = seal(() => callHost("get", id, name, []));
      ReflectDefineProperty(target, name, {
        __proto__: null,
        get: getter,
        enumerable: true,
        configurable: false,
      } as any);
    }
    ObjectFreeze(target);
    ReflectApply(WeakMapSet, shapeOfProxy, [target, shape]);
    ReflectApply(MapSet, proxyById, [id, target]);
    return target;
  }

  const decodeOptions = ObjectFreeze({ __proto__: null, onHandle: makeProxy }) as any;

  function knownHandle(value: object): any {
    return ReflectApply(WeakMapGet, shapeOfProxy, [value]);
  }

  function hostError(value: any): Error {
    const name = typeof value?.name === "string" ? value.name : "Error";
    const message = typeof value?.message === "string" ? value.message : StringCtor(value);
    const ctor = errorConstructors[name];
    let error: any;
    if (ctor !== undefined) {
      error = new ctor(message);
    } else {
      error = ObjectCreate(ErrorCtor.prototype);
      ReflectDefineProperty(error, "name", {
        __proto__: null,
        value: name,
        writable: true,
        enumerable: false,
        configurable: true,
      } as PropertyDescriptor);
      ReflectDefineProperty(error, "message", {
        __proto__: null,
        value: message,
        writable: true,
        enumerable: false,
        configurable: true,
      } as PropertyDescriptor);
      ErrorCaptureStackTrace(error);
    }
    if (
      value !== null &&
      typeof value === "object" &&
      (typeof value.code === "string" || typeof value.code === "number")
    ) {
      ReflectDefineProperty(error, "code", {
        __proto__: null,
        value: value.code,
        writable: true,
        enumerable: true,
        configurable: true,
      } as PropertyDescriptor);
    }
    const fields = value !== null && typeof value === "object" ? value.fields : undefined;
    if (fields !== null && typeof fields === "object" && !ArrayIsArray(fields)) {
      for (const key of ObjectKeys(fields)) {
        if (key === "name" || key === "message" || key === "code" || key === "stack" || key === "__proto__")
          continue;
        ReflectDefineProperty(error, key, {
          __proto__: null,
          value: fields[key],
          writable: true,
          enumerable: true,
          configurable: true,
        } as PropertyDescriptor);
      }
    }
    return error;
  }

  // ---- the run's clock and random values: recorded, and replayed on resume -----------------------------------
  let clockLog: number[] = [];
  let randomLog: number[] = [];
  let clockReplay: number[] = [];
  let randomReplay: number[] = [];

  // A run that reads the clock in a busy loop must not fill its heap with the log: past this many values per kind
  // nothing more is logged (a resume then reads fresh values there, and reports any path that changes as a result).
  const MAX_LOGGED_VALUES = 100_000;

  function replayed(log: number[], replay: number[], fresh: () => number): number {
    const index = log.length;
    if (index >= MAX_LOGGED_VALUES) return fresh();
    const value = index < replay.length && typeof replay[index] === "number" ? replay[index]! : fresh();
    append(log, value);
    return value;
  }
  function clock(): number {
    return replayed(clockLog, clockReplay, () => ReflectApply(DateNow, DateCtor, []));
  }
  function random(): number {
    return replayed(randomLog, randomReplay, () => ReflectApply(MathRandom, MathObject, []));
  }
  // `new Date()`, `Date()` and `Date.now()` read the run's clock; every other use of Date is untouched.
  const RecordedDate = new ProxyCtor(DateCtor, {
    __proto__: null,
    construct(target: DateConstructor, args: unknown[], newTarget: Function) {
      return ReflectConstruct(target, args.length === 0 ? [clock()] : args, newTarget);
    },
    apply() {
      return ReflectApply(DateToString, ReflectConstruct(DateCtor, [clock()]), []);
    },
  } as ProxyHandler<DateConstructor>);
  ReflectDefineProperty(DateCtor, "now", {
    __proto__: null,
    value: function now() {
      return clock();
    },
    writable: true,
    enumerable: false,
    configurable: true,
  } as PropertyDescriptor);
  ReflectDefineProperty(DateCtor.prototype, "constructor", {
    __proto__: null,
    value: RecordedDate,
    writable: true,
    enumerable: false,
    configurable: true,
  } as PropertyDescriptor);
  ReflectDefineProperty(global, "Date", {
    __proto__: null,
    value: RecordedDate,
    writable: true,
    enumerable: false,
    configurable: true,
  } as PropertyDescriptor);
  ReflectDefineProperty(MathObject, "random", {
    __proto__: null,
    value: function random_() {
      return random();
    },
    writable: true,
    enumerable: false,
    configurable: true,
  } as PropertyDescriptor);

  function recorded(): string {
    return JSONStringify({ __proto__: null, clock: clockLog, random: randomLog });
  }

  // How much of each log the host was told: every host call carries the values read since the call before it, so a
  // checkpoint the host takes at a call holds every value the code read before that call (a takeover replays them).
  let clockReported = 0;
  let randomReported = 0;
  function unreported(): string {
    if (clockLog.length === clockReported && randomLog.length === randomReported) return "";
    const clockValues: number[] = [];
    const randomValues: number[] = [];
    for (let i = clockReported; i < clockLog.length; i++) append(clockValues, clockLog[i]);
    for (let i = randomReported; i < randomLog.length; i++) append(randomValues, randomLog[i]);
    clockReported = clockLog.length;
    randomReported = randomLog.length;
    return JSONStringify({ __proto__: null, clock: clockValues, random: randomValues });
  }

  /**
   * The frames a sync call's site is first looked for in (the handle's function, the caller, two more): capturing a
   * stack is most of a host call's cost in the isolate and grows with the frames taken; a caller deeper (a call made
   * through built-ins) is looked for again in the whole stack (call-site.ts). A call declared to return a promise
   * takes as many as a default stack shows: its rejection's stack shows them.
   */
  const SITE_FRAMES = 4;
  const PROMISE_FRAMES = 12;

  interface Settlers {
    resolve: (value: unknown) => void;
    reject: (error: unknown) => void;
  }

  /** A call of an `asyncMethods` member waiting for its turn's batch. */
  interface QueuedCall extends Settlers {
    call: unknown[];
    site: CallSiteFrames | undefined;
  }
  let queued: QueuedCall[] = [];
  let queuedCharacters = 0;
  let flushScheduled = false;
  const MAX_BATCH_CALLS = 256;
  const MAX_BATCH_CHARACTERS = 1024 * 1024;

  /**
   * Makes a host call. A `batched` call (a method declared to return a Promise) is queued and its promise returned
   * at once; the queue crosses in one batch at the end of the microtask turn, or before any other call crosses, so
   * the host sees every call in program order. Everything a call decides at once (the limit already hit, its
   * arguments' encoding, its call site, the clock and random values read before it) is decided when it is made.
   */
  function callHost(
    operation: HostOperation,
    id: number,
    member: string | null,
    args: unknown[],
    batched = false,
  ): unknown {
    if (limitHit !== null && limitHit.kind !== "output-limit") throw new ErrorCtor(limitHit.message);
    const label = member === null ? "host function" : `${member}()`;
    const encoded = codec.encode(args, {
      __proto__: null,
      rootPath: `arguments of ${label}`,
      knownHandle,
    } as any);
    // Where in the run's script the call is made (approvals, policies and the trace name its line; call-site.ts).
    // The rejection of a host promise arrives later from bootstrap code: the caller's frames are kept for its stack.
    const site = callSite(callHost, batched ? PROMISE_FRAMES : SITE_FRAMES);
    const at = site.at;
    const stack = site.frames;
    if (batched) {
      const call = nullArray(operation, id, member, encoded, at, unreported());
      const promise = new PromiseCtor((resolve, reject) => {
        append(queued, { __proto__: null, call, resolve, reject, site: stack });
      });
      queuedCharacters += encoded.length;
      // A batch holds its calls' arguments until it crosses: a long or heavy one crosses at once.
      if (queued.length >= MAX_BATCH_CALLS || queuedCharacters >= MAX_BATCH_CHARACTERS) flush();
      else if (!flushScheduled) {
        flushScheduled = true;
        void flushLater();
      }
      return promise;
    }
    flush();
    if (limitHit !== null && limitHit.kind !== "output-limit") throw new ErrorCtor(limitHit.message);
    return receive(hostCall(operation, id, member, encoded, at, unreported()), stack, undefined);
  }

  // `await` of a plain value queues one microtask and looks up nothing model code could have patched.
  async function flushLater(): Promise<void> {
    await undefined;
    flush();
  }

  /** Sends the queued calls in one batch and settles each call's promise from its reply; never throws. */
  function flush(): void {
    flushScheduled = false;
    if (queued.length === 0) return;
    const batch = queued;
    queued = [];
    queuedCharacters = 0;
    let replies: unknown;
    if (limitHit === null || limitHit.kind === "output-limit") {
      const calls = nullArray();
      for (let i = 0; i < batch.length; i++) calls[i] = batch[i]!.call;
      try {
        replies = JSONParse(hostCalls(JSONStringify(calls)));
      } catch {}
    }
    for (let i = 0; i < batch.length; i++) {
      const entry = batch[i]!;
      try {
        const reply = ArrayIsArray(replies) ? replies[i] : undefined;
        if (typeof reply === "string") receive(reply, entry.site, entry);
        // The host stopped before this call: it fails as it would have, made after the call that stopped it.
        else throw new ErrorCtor(limitHit !== null ? limitHit.message : "the host did not answer this call");
      } catch (error) {
        entry.reject(withSite(error, entry.site));
      }
    }
  }

  /**
   * What a host call's reply means for model code: its value, a thrown error, or a promise settled later (`into`
   * given: that promise's settlers receive the value or the later settlement instead).
   */
  function receive(reply: string, site: CallSiteFrames | undefined, into: Settlers | undefined): unknown {
    const tag = slice(reply, 0, 1);
    const body = slice(reply, 1);
    if (tag === "v") {
      const value = codec.decode(body, decodeOptions);
      if (into !== undefined) into.resolve(value);
      return value;
    }
    if (tag === "e") throw hostError(codec.decode(body, decodeOptions));
    if (tag === "p") {
      const promiseId = NumberCtor(body);
      if (into !== undefined) {
        ReflectApply(MapSet, pending, [
          promiseId,
          { __proto__: null, resolve: into.resolve, reject: into.reject, site },
        ]);
        return undefined;
      }
      return new PromiseCtor((resolve, reject) => {
        ReflectApply(MapSet, pending, [promiseId, { __proto__: null, resolve, reject, site }]);
      });
    }
    // The call waits for a person's decision: the run pauses once nothing else can happen (the host decides when).
    if (tag === "w") return into !== undefined ? undefined : new PromiseCtor(() => {});
    if (tag === "l" || tag === "d" || tag === "s") {
      const kind = tag === "l" ? "call-limit" : tag === "d" ? "replay-diverged" : "paused";
      if (limitHit === null) limitHit = { __proto__: null, kind, message: body } as any;
      throw new ErrorCtor(body);
    }
    throw new ErrorCtor(`unexpected host reply ${JSONStringify(tag)}`);
  }

  /** The error with the frames of the call that caused it (its stack text names the caller's lines). */
  function withSite(error: any, site: CallSiteFrames | undefined): unknown {
    if (site === undefined || error === null || typeof error !== "object") return error;
    const header = `${StringCtor(error.name)}: ${StringCtor(error.message)}`;
    ReflectDefineProperty(error, "stack", {
      __proto__: null,
      value: `${header}${formatFrames(site)}`,
      writable: true,
      enumerable: false,
      configurable: true,
    } as PropertyDescriptor);
    return error;
  }

  function settle(promiseId: number, tag: string, body: string): void {
    const entry = ReflectApply(MapGet, pending, [promiseId]);
    if (entry === undefined) return;
    ReflectApply(MapDelete, pending, [promiseId]);
    let value: unknown;
    try {
      value = codec.decode(body, decodeOptions);
    } catch (error) {
      entry.reject(error);
      return;
    }
    if (tag === "v") {
      entry.resolve(value);
      return;
    }
    entry.reject(withSite(hostError(value), entry.site));
  }

  function settleAll(settlements: string): void {
    const list = JSONParse(settlements);
    if (!ArrayIsArray(list)) return;
    for (let i = 0; i < list.length; i++) {
      const item = list[i];
      if (ArrayIsArray(item)) settle(item[0], item[1], item[2]);
    }
  }

  // ---- stdout --------------------------------------------------------------------------------------------
  function write(text: string): void {
    if (stdoutClosed) throw new ErrorCtor(`stdout limit of ${maxStdout} bytes reached`);
    const line = `${text}\n`;
    const bytes = utf8Length(line);
    if (stdoutBytes + bytes <= maxStdout) {
      stdoutBytes += bytes;
      emit(line);
      return;
    }
    const kept = truncateToBytes(line, maxStdout - stdoutBytes);
    const marker = stdoutTruncationMarker(maxStdout);
    emit(`${kept}${kept === "" ? "" : "\n"}${marker}\n`);
    stdoutBytes = maxStdout;
    stdoutClosed = true;
    if (limitHit === null)
      limitHit = {
        __proto__: null,
        kind: "output-limit",
        message: `stdout limit of ${maxStdout} bytes reached`,
      } as any;
    throw new ErrorCtor(`stdout limit of ${maxStdout} bytes reached`);
  }

  function logger(pretty: boolean): Function {
    return seal((...values: unknown[]) => {
      write(formatValues(values, pretty));
    });
  }

  const consoleObject = ObjectCreate(ObjectPrototype);
  for (const name of ["log", "info", "warn", "error", "debug"])
    ReflectDefineProperty(consoleObject, name, data(logger(false), false));
  ObjectFreeze(consoleObject);
  ReflectDefineProperty(global, "console", {
    __proto__: null,
    value: consoleObject,
    writable: true,
    enumerable: false,
    configurable: true,
  } as PropertyDescriptor);

  // ---- install: globals and moss -------------------------------------------------------------------------
  // `moss` as model code sees it is a forwarding proxy of this object: every trap that can hand out or change a
  // property's value (get, set, defineProperty, deleteProperty, getOwnPropertyDescriptor) marks that name touched,
  // for good (a value handed out may be kept anywhere and changed in a later run). A data field never touched still
  // holds the value its last snapshot encoded, so the snapshot skips comparing it. Bootstrap code reads this object
  // directly, so the snapshot itself marks nothing.
  let moss: any;
  const touched = new MapCtor<string | symbol, true>();
  const touch = (key: string | symbol) => {
    ReflectApply(MapSet, touched, [key, true]);
  };
  const mossTraps: ProxyHandler<object> = {
    __proto__: null,
    get(target, key, receiver) {
      touch(key);
      return ReflectGet(target, key, receiver);
    },
    set(target, key, value, receiver) {
      touch(key);
      return ReflectSet(target, key, value, receiver);
    },
    defineProperty(target, key, descriptor) {
      touch(key);
      return ReflectDefineProperty(target, key, descriptor);
    },
    deleteProperty(target, key) {
      touch(key);
      return ReflectDeleteProperty(target, key);
    },
    getOwnPropertyDescriptor(target, key) {
      touch(key);
      return ReflectGetOwnPropertyDescriptor(target, key);
    },
  } as ProxyHandler<object>;
  let dataFields: string[] = [];
  let installed = false;

  function install(
    globals: string,
    mossData: string,
    mossServices: string,
    fields: string,
    definitions: string,
  ): void {
    if (installed) throw new ErrorCtor("the session is already installed");
    installed = true;
    const names = codec.decode(globals, decodeOptions) as Record<string, unknown>;
    const keys = ObjectKeys(names);
    for (let i = 0; i < keys.length; i++) {
      const name = keys[i]!;
      const value = names[name];
      const isProxy =
        (typeof value === "object" || typeof value === "function") &&
        value !== null &&
        knownHandle(value) !== undefined;
      ReflectDefineProperty(global, name, data(value, !isProxy));
    }
    moss = ObjectCreate(ObjectPrototype);
    const values = codec.decode(mossData, decodeOptions) as Record<string, unknown>;
    const valueKeys = ObjectKeys(values);
    for (let i = 0; i < valueKeys.length; i++) {
      const name = valueKeys[i]!;
      ReflectApply(MapSet, knownFields, [name, true]);
      ReflectDefineProperty(moss, name, {
        __proto__: null,
        value: values[name],
        writable: true,
        enumerable: true,
        configurable: true,
      } as PropertyDescriptor);
    }
    const services = codec.decode(mossServices, decodeOptions) as Record<string, unknown>;
    const serviceKeys = ObjectKeys(services);
    for (let i = 0; i < serviceKeys.length; i++) {
      const name = serviceKeys[i]!;
      ReflectDefineProperty(moss, name, data(services[name], false));
    }
    // Typed by the names, so a name added to MOSS_OWN_MEMBERS fails the build until it is set here.
    const own: Record<MossOwnMember, unknown> = {
      pprint: logger(true),
      ask: async function ask(question: unknown, options?: unknown) {
        return callHost("ask", 0, "ask", [question, options]);
      },
      show: function show(image: unknown) {
        callHost("show", 0, "show", [image]);
      },
    };
    for (let i = 0; i < MOSS_OWN_MEMBERS.length; i++) {
      const name = MOSS_OWN_MEMBERS[i]!;
      ReflectDefineProperty(moss, name, data(own[name], false, false));
    }
    ReflectDefineProperty(global, "moss", data(new ProxyCtor(moss, mossTraps), false));
    const parsed = JSONParse(fields);
    dataFields = ArrayIsArray(parsed) ? parsed : [];
    for (let i = 0; i < valueKeys.length; i++) {
      ReflectApply(MapSet, saved, [valueKeys[i], { __proto__: null, text: mossData, hasCopy: false }]);
    }
    // The session's kept definitions (only ones whose evaluation runs no model code): a rebuilt session has them again.
    if (definitions !== "") IndirectEval(`${definitions}\n//# sourceURL=definitions.js`);
  }

  // ---- data snapshot -----------------------------------------------------------------------------------------
  // Per data field, what the host holds: the wire text that carried it (the installed data or a snapshot) and, once
  // a snapshot of this isolate encoded it, the encoder's node table of that snapshot (private: model code never
  // reaches it) with the field's node and the size it was charged. A field whose value would encode exactly as that
  // node is not sent again: the host keeps what it has (and the sizes still count).
  interface SavedField {
    text: string;
    hasCopy: boolean;
    nodes?: unknown[];
    index?: number;
    /** Whether the snapshot's table reaches a node from two places (then sharing is compared too). */
    shares?: boolean;
    expanded?: number;
    length?: number;
  }
  const saved = new MapCtor<string, SavedField>();
  const isHostObject = (value: object) => knownHandle(value) !== undefined;
  // Encoded text may be this many times longer than the expanded-size budget (indices, tags): a first, cheap bound.
  const WIRE_SLACK = 4;

  // Warnings about values left out of a snapshot are capped below the host's own cap (model code decides how many
  // there are), so the refusals, listed first, and the count of the rest always reach the host.
  const MAX_SNAPSHOT_WARNINGS = 30;

  function warn(warnings: string[], text: string, dropped: { count: number }): void {
    if (warnings.length < MAX_SNAPSHOT_WARNINGS) append(warnings, text);
    else dropped.count++;
  }

  // Data fields that have lived on `moss` (installed, or set by the code since). One that was never there (refused
  // when installed) is left out of the snapshot while it stays absent: the host keeps its saved value.
  const knownFields = new MapCtor<string, true>();

  function presentFields(): string[] {
    const present: string[] = [];
    for (let i = 0; i < dataFields.length; i++) {
      const field = dataFields[i]!;
      if (ObjectHasOwn(moss, field)) ReflectApply(MapSet, knownFields, [field, true]);
      if (ReflectApply(MapGet, knownFields, [field]) === true) append(present, field);
    }
    return present;
  }

  /**
   * Encodes the data fields present on `moss` that changed since the host last received them, each bounded on its
   * own (its expanded size against what is left of the result budget, its depth, its bigints); an unchanged field
   * is charged the size it had. A refused field is named in a warning and set back to its last saved value, so the
   * isolate and the persisted context agree; a field deleted by the code is left as it was.
   */
  function snapshotData(
    warnings: string[],
    budget: number,
  ): { text: string; expanded: number; length: number } {
    const present = presentFields();
    const changed: string[] = [];
    let remaining = budget;
    let keptExpanded = 0;
    let keptLength = 0;
    for (let i = 0; i < present.length; i++) {
      const field = present[i]!;
      const entry = ReflectApply(MapGet, saved, [field]) as SavedField | undefined;
      let same = false;
      if (entry?.hasCopy && (entry.expanded as number) <= remaining) {
        if (ReflectApply(MapGet, touched, [field]) !== true) same = true;
        else {
          try {
            // A getter on `moss` itself is not read here: the encoder refuses it.
            same =
              ReflectApply(ObjectLookupGetter, moss, [field]) === undefined &&
              codec.sameWireValue(
                moss[field],
                entry.nodes as unknown[],
                entry.index as number,
                isHostObject,
                entry.shares === true,
                isModelProxy,
              );
          } catch {}
        }
      }
      if (same) {
        remaining -= entry!.expanded as number;
        keptExpanded += entry!.expanded as number;
        keptLength += entry!.length as number;
      } else append(changed, field);
    }
    const refused: string[] = [];
    const refusals: string[] = [];
    const leftOut: string[] = [];
    const dropped = { __proto__: null, count: 0 };
    let sizes: unknown[] = [];
    const onEncoded = (field: string, expanded: number, length: number) => {
      append(sizes, field);
      append(sizes, expanded);
      append(sizes, length);
    };
    const options = {
      __proto__: null,
      rootPath: "moss",
      knownHandle: (value: object) => (knownHandle(value) === undefined ? undefined : null),
      onUnsupported: (unsupported: { path: string; description: string }) =>
        warn(leftOut, `${unsupported.path} is ${unsupported.description} and was not persisted`, dropped),
      onRefused: (field: string, reason: string) => {
        append(refused, field);
        append(refusals, `moss.${field} ${reason}; it was not persisted and keeps its last saved value`);
      },
      onEncoded,
      maxLength: WIRE_SLACK * budget - keptLength,
      maxExpanded: remaining,
      isProxy: isModelProxy,
    };
    let snapshot = codec.encodeFields(moss, changed, options as any);
    if (refused.length > 0) {
      restoreFields(refused);
      sizes = [];
      const quiet = {
        __proto__: null,
        rootPath: "moss",
        knownHandle: options.knownHandle,
        onUnsupported: () => {},
        onRefused: () => {},
        onEncoded,
        maxLength: options.maxLength,
        maxExpanded: options.maxExpanded,
        isProxy: isModelProxy,
      };
      const still: string[] = [];
      for (let i = 0; i < changed.length; i++) {
        if (ReflectApply(MapGet, knownFields, [changed[i]]) === true) append(still, changed[i]);
      }
      snapshot = codec.encodeFields(moss, still, quiet as any);
    }
    for (let i = 0; i < refusals.length; i++) append(warnings, refusals[i]);
    for (let i = 0; i < leftOut.length; i++) append(warnings, leftOut[i]);
    if (dropped.count > 0) append(warnings, `… and ${dropped.count} more values that were not persisted`);
    if (sizes.length > 0) {
      // The record's node lists each field written and the node of its value.
      const root = snapshot.nodes[0] as unknown[];
      const indexOf = new MapCtor<string, number>();
      for (let i = 1; i + 1 < root.length; i += 2) ReflectApply(MapSet, indexOf, [root[i], root[i + 1]]);
      for (let i = 0; i + 2 < sizes.length; i += 3) {
        const field = sizes[i] as string;
        ReflectApply(MapSet, saved, [
          field,
          {
            __proto__: null,
            text: snapshot.text,
            hasCopy: true,
            nodes: snapshot.nodes,
            index: ReflectApply(MapGet, indexOf, [field]),
            shares: snapshot.shares,
            expanded: sizes[i + 1],
            length: sizes[i + 2],
          },
        ]);
      }
    }
    return {
      text: snapshot.text,
      expanded: snapshot.expanded + keptExpanded,
      length: snapshot.text.length + keptLength,
    };
  }

  function restoreFields(fields: string[]): void {
    for (let i = 0; i < fields.length; i++) {
      const field = fields[i]!;
      try {
        const entry = ReflectApply(MapGet, saved, [field]) as SavedField | undefined;
        let values: any = ObjectCreate(null);
        if (entry !== undefined) values = codec.decode(entry.text, decodeOptions);
        if (ObjectHasOwn(values, field)) {
          ReflectDefineProperty(moss, field, {
            __proto__: null,
            value: values[field],
            writable: true,
            enumerable: true,
            configurable: true,
          } as PropertyDescriptor);
        } else {
          // No saved value inside: the field goes back to absent, and the host keeps whatever it holds.
          ReflectDeleteProperty(moss, field);
          ReflectApply(MapDelete, knownFields, [field]);
        }
      } catch {}
    }
  }

  // ---- run -----------------------------------------------------------------------------------------------
  function begin(maxStdoutBytes: number): void {
    maxStdout = maxStdoutBytes;
    stdoutBytes = 0;
    stdoutClosed = false;
    limitHit = null;
    ReflectApply(MapClear, pending, []);
    queued = [];
    queuedCharacters = 0;
    flushScheduled = false;
  }

  function describeError(error: unknown): { name: string; message: string; stack?: string } {
    if ((typeof error === "object" || typeof error === "function") && error !== null) {
      try {
        const isError = ReflectApply(ObjectToString, error, []) === "[object Error]";
        const name = (error as any).name;
        const message = (error as any).message;
        const stack = (error as any).stack;
        if (isError || typeof message === "string") {
          return {
            __proto__: null,
            name: typeof name === "string" ? name : "Error",
            message: typeof message === "string" ? message : StringCtor(message),
            stack: typeof stack === "string" ? stack : undefined,
          } as any;
        }
      } catch {}
    }
    let text: string;
    try {
      text = inspect(error, false, 0, [], "");
    } catch {
      text = "a value that cannot be shown";
    }
    return { __proto__: null, name: "Error", message: `Uncaught ${text}` } as any;
  }

  async function run(
    target: string,
    argumentsJson: string,
    maxResultBytes: number,
    scriptError: string,
  ): Promise<string> {
    let ok = false;
    let returned: unknown;
    let error: any;
    if (scriptError !== "") {
      error = JSONParse(scriptError);
    } else {
      try {
        if (!ReflectHas(global, target)) {
          throw new ReferenceErrorCtor(
            `${target} is not defined: the code must declare \`function ${target}(...)\` at its top level`,
          );
        }
        const fn = ReflectGet(global, target);
        if (typeof fn !== "function")
          throw new TypeErrorCtor(`${target} is not a function (it is ${typeof fn})`);
        const specs = JSONParse(argumentsJson);
        const args: unknown[] = [];
        for (let i = 0; i < specs.length; i++) {
          const spec = specs[i];
          if (typeof spec.local === "string") {
            if (!ReflectHas(global, spec.local)) throw new ReferenceErrorCtor(`${spec.local} is not defined`);
            append(args, ReflectGet(global, spec.local));
          } else {
            append(args, codec.decode(spec.wire, decodeOptions));
          }
        }
        let result = ReflectApply(fn, undefined, args);
        if (
          (typeof result === "object" || typeof result === "function") &&
          result !== null &&
          typeof (result as any).then === "function"
        ) {
          result = await result;
        }
        returned = result;
        ok = true;
      } catch (caught) {
        error = describeError(caught);
      }
    }
    ReflectApply(MapClear, pending, []);

    // Prototype-less, like every part of the envelope: JSON.stringify must find no toJSON planted by model code.
    const warnings: string[] = [];
    ReflectSetPrototypeOf(warnings, null);
    const envelope: SandboxEnvelope = { __proto__: null, ok, warnings } as any;
    let budget = maxResultBytes;
    let resultError: any;
    // The text shares one bound too: the snapshot's text is taken from what the return value may use.
    let textBudget = WIRE_SLACK * maxResultBytes;
    if (moss !== undefined) {
      const snapshot = snapshotData(warnings, budget);
      envelope.mossData = snapshot.text;
      budget -= snapshot.expanded;
      textBudget -= snapshot.length;
    }
    if (ok) {
      try {
        envelope.returns = codec.encode(returned, {
          __proto__: null,
          rootPath: "returns",
          knownHandle,
          // After the snapshot no model code runs: a getter or a Proxy in the result is left out, not read.
          isProxy: isModelProxy,
          onUnsupported: (unsupported: { path: string; description: string }) =>
            append(warnings, `${unsupported.path} is ${unsupported.description} and was not returned`),
          maxLength: textBudget,
          maxExpanded: budget,
        } as any);
      } catch (caught) {
        resultError = describeError(caught);
      }
    }
    if (resultError !== undefined) {
      envelope.ok = false;
      envelope.returns = undefined;
      envelope.error =
        resultError.name === "WireLimitError"
          ? ({
              __proto__: null,
              kind: "output-limit",
              name: "RangeError",
              message: `the return value cannot be sent back: ${resultError.message} (the result limit of ${maxResultBytes} bytes counts the moss data too)`,
            } as any)
          : ({ __proto__: null, kind: "runtime", ...resultError } as any);
    } else if (limitHit !== null) {
      envelope.ok = false;
      envelope.returns = undefined;
      const limitError = error !== undefined && error.message === limitHit.message ? error : undefined;
      envelope.error = {
        __proto__: null,
        kind: limitHit.kind,
        name: "RangeError",
        message: limitHit.message,
        stack: limitError?.stack,
      } as any;
    } else if (!ok) {
      envelope.error = { __proto__: null, kind: "runtime", ...error } as any;
    }
    return JSONStringify(envelope);
  }

  // Starts a run and returns at once; the envelope reaches the host through `done` when the run settles.
  function start(target: string, argumentsJson: string, maxResultBytes: number, scriptError: string): void {
    ReflectApply(PromiseThen, run(target, argumentsJson, maxResultBytes, scriptError), [done]);
  }

  // Evaluates the model's script and starts its target in one entry; frames of the script are named `filename`.
  function runScript(
    maxStdoutBytes: number,
    source: string,
    filename: string,
    target: string,
    argumentsJson: string,
    maxResultBytes: number,
    replayJson: string,
  ): void {
    begin(maxStdoutBytes);
    clockLog = [];
    randomLog = [];
    clockReported = 0;
    randomReported = 0;
    const replay = replayJson === "" ? null : JSONParse(replayJson);
    clockReplay = replay !== null && ArrayIsArray(replay.clock) ? replay.clock : [];
    randomReplay = replay !== null && ArrayIsArray(replay.random) ? replay.random : [];
    let scriptError = "";
    try {
      expectRunScript();
      IndirectEval(`${source}\n//# sourceURL=${filename}`);
    } catch (caught) {
      const described = describeError(caught);
      const parsed =
        described.name === "SyntaxError" && !StringIncludes(described.stack ?? "", `${filename}:`);
      scriptError = JSONStringify({ __proto__: null, kind: parsed ? "syntax" : "runtime", ...described });
    }
    start(target, argumentsJson, maxResultBytes, scriptError);
  }

  return ObjectFreeze({ __proto__: null, install, runScript, settle, settleAll, recorded } as any);
}
