import {
  type CallbackOperation,
  decodeWire,
  encodeWire,
  type HandleOperation,
  type HandleShape,
  type HostMembrane,
  type HostOutcome,
  hostErrorWire,
  isReachableName,
  redactErrorValues,
  writtenStrings,
} from "../membrane/index.ts";
import { type DeclaredType, type MemberAbout, NOTHING, RUNTIME, UNDECLARED } from "./declared-members.ts";

interface HandleEntry {
  value: object;
  shape: HandleShape;
  /** The declared type the handle was made for: it decides the members and the types of what they return. */
  type: DeclaredType;
  /** Where the handle was reached from, for approvals, policies and call traces. */
  label: HandleLabel;
  /** The position the runtime installed it at (`moss.silo`, a visible name), absent for a handle a call returned. */
  origin: string | undefined;
}

/** What a handle denotes, for a run log that matches and describes it. */
export interface HandleInfo {
  /** The position the runtime installed it at (`moss.silo`), absent for a handle a call returned. */
  origin: string | undefined;
  /** Its declared type as TypeScript writes it, when known. */
  typeName: string | undefined;
}

/** Names a handle: the service (`moss` field) it belongs to and its own name (a function's, a module value's). */
export interface HandleLabel {
  service?: string;
  name?: string;
}

/** What a host call reaches, as approvals, policies and call traces name it. */
export interface CallTarget {
  /** The `moss` field or visible module name the handle was reached from (results inherit their caller's). */
  service: string | undefined;
  /** The member called or read; a function's own name when the handle itself is called. */
  member: string;
  /** Whether the member's declaration carries `@approval`. */
  approval: boolean;
  /** Whether the member's declaration carries `@idempotent` (a call in doubt after a takeover may run again). */
  idempotent?: boolean;
  /** Whether the call may answer with a plain value (not a Promise): waiting for a person then stops the run. */
  sync: boolean;
  /** The member's declared parameters and doc comment, read when a request shows the call to a person. */
  about?: () => MemberAbout | undefined;
}

/**
 * Where host code's calls of a function or class model code handed over go (a function handle passed to a host
 * function, which calls it): the run in progress decides them as it decides the code's own calls.
 */
export type CallbackRoute = (operation: CallbackOperation, handle: number, args: string) => HostOutcome;

/** What host code's call of a function model code handed over gets when no run is in progress. */
export function outsideRun(): HostOutcome {
  return {
    kind: "error",
    wire: hostErrorWire(
      new Error("a function model code handed over can only be called while the code runs"),
    ),
  };
}

/** Answers, for an undeclared position, the declared type of the value's nearest declared class. */
export type NearestDeclaredClass = (value: object) => DeclaredType | undefined;

/**
 * The host side of the membrane: host objects model code may reach are registered as handles; each call from the
 * isolate names a handle and a member. A handle offers only the members of the type declared where it crossed (a
 * service field's type, a method's declared return type with Promise unwrapped, a property's declared type), never
 * what its run-time class has beyond that. Arguments and results cross as wire text; host objects that are not
 * plain data cross as further handles, typed by the declaration of the position they are in.
 */
export class HandleMembrane implements HostMembrane {
  readonly #entries = new Map<number, HandleEntry>();
  /** Handle ids of a host object by declared type and label: one object at two `moss` fields is two handles. */
  readonly #ids = new WeakMap<object, Map<DeclaredType, Map<string, number>>>();
  readonly #nearestDeclaredClass: NearestDeclaredClass;
  readonly #programClass: NearestDeclaredClass;
  /** The labels of the positions the runtime installed an object at (a service bound to several fields has several). */
  readonly #roots = new WeakMap<object, HandleLabel[]>();
  /** How handles made by the encode in progress are labelled. */
  #labelling: Labelling = { kind: "result", caller: {} };
  #route: CallbackRoute = outsideRun;
  /** What host code receives for a function or class handle in a call's arguments (one per handle). */
  readonly #callbacks = new Map<number, (...args: unknown[]) => unknown>();
  readonly #callbackHandles = new WeakMap<object, object>();
  /** Classes model code may never construct (service classes and their subclasses). */
  #unconstructible: (value: object) => boolean = () => false;
  #nextId = 1;

  /**
   * `nearestDeclaredClass` types objects crossing where the declaration says `any`/`unknown`/`object`;
   * `programClass` types objects the host handed over untyped (`withLocals`) by their class's declaration.
   */
  constructor(
    options: { nearestDeclaredClass?: NearestDeclaredClass; programClass?: NearestDeclaredClass } = {},
  ) {
    this.#nearestDeclaredClass = options.nearestDeclaredClass ?? (() => undefined);
    this.#programClass = options.programClass ?? (() => undefined);
  }

  /** Sends host code's calls of function and class handles it was given through `route` (the run's decisions). */
  routeCallbacks(route: CallbackRoute): void {
    this.#route = route;
  }

  /** Marks classes model code may never construct, whatever position they cross in (service classes). */
  refuseConstruction(test: (value: object) => boolean): void {
    this.#unconstructible = test;
  }

  /**
   * Encodes a value the runtime installs at `rootPath` (a `moss` service field, a visible name): its handles are its
   * own, labelled by `label` (functions of a plain object under it by their key too), and denote that position.
   */
  encodeRoot(value: unknown, rootPath: string, type: DeclaredType, label: HandleLabel): string {
    if ((typeof value === "object" || typeof value === "function") && value !== null) {
      const roots = this.#roots.get(value) ?? [];
      if (!roots.some((known) => sameLabel(known, label))) roots.push(label);
      this.#roots.set(value, roots);
    }
    this.#labelling = { kind: "root", rootPath, label };
    try {
      return this.encode(value, rootPath, type);
    } finally {
      this.#labelling = { kind: "result", caller: {} };
    }
  }

  /** What a handle denotes (its installed position, its declared type), or undefined for one that does not exist. */
  info(handle: number): HandleInfo | undefined {
    const entry = this.#entries.get(handle);
    if (entry === undefined) return undefined;
    return { origin: entry.origin, typeName: entry.type.name };
  }

  /** What a call names (`operation` as the isolate sends it), or undefined for a handle that does not exist. */
  describe(operation: HandleOperation, handle: number, member: string | null): CallTarget | undefined {
    const entry = this.#entries.get(handle);
    if (entry === undefined) return undefined;
    const { service, name } = entry.label;
    const type = entry.type;
    const about = () => type.about?.(member, operation === "construct");
    if (operation === "construct") {
      const approval = type.kind !== "runtime" && type.constructApproval;
      return { service, member: `new ${name ?? "(class)"}`, approval, sync: true, about };
    }
    if (member === null) {
      return {
        service,
        member: name ?? "(function)",
        approval: type.callApproval,
        sync: type.callSync,
        about,
      };
    }
    const owner = service ?? name;
    const approval = type.approvals.has(member);
    // A read of an `@approval` member (a getter runs host code on every read) needs the same yes as a call.
    if (operation === "get") return { service: owner, member, approval, sync: true, about };
    const sync = type.kind === "runtime" || (type.members.get(member)?.callSync ?? true);
    return { service: owner, member, approval, sync, idempotent: type.idempotents.has(member), about };
  }

  /**
   * What host code can do with a handle it is handed in a call's arguments: call a function, construct a class
   * (named as `describe` names it); undefined for objects and unknown handles.
   */
  handedOver(handle: number): CallTarget | undefined {
    const entry = this.#entries.get(handle);
    if (entry === undefined || typeof entry.value !== "function") return undefined;
    return this.describe(kindOf(entry.value) === "class" ? "construct" : "call", handle, null);
  }

  /** Decodes call arguments as data for a person or a policy to read: host objects appear as `describe` says. */
  argumentsAsData(args: string, describe: (handle: number) => unknown = () => "[host object]"): unknown[] {
    try {
      const decoded = decodeWire(args, { onHandle: (shape) => describe(shape.id) });
      return Array.isArray(decoded) ? decoded : [];
    } catch {
      return [];
    }
  }

  /** Encodes a host value for the isolate; host objects in it become handles typed by `type` (its declaration). */
  encode(given: unknown, rootPath?: string, type: DeclaredType = UNDECLARED): string {
    const value = declaredView(given, type);
    const typed = typeHostObjects(value, type);
    return encodeWire(value, {
      rootPath,
      onHostObject: (object, path) =>
        this.#shapeOf(this.#callbackHandles.get(object) ?? object, typed?.get(object) ?? UNDECLARED, path),
    });
  }

  /**
   * Decodes wire text from the isolate; handles resolve to the host objects they stand for. The expanded value is
   * bounded by `maxExpandedBytes` (default: the default result limit) before anything is built.
   */
  decode(text: string, maxExpandedBytes?: number): unknown {
    return decodeWire(text, {
      onHandle: (shape) => this.#entries.get(shape.id)?.value,
      ...(maxExpandedBytes === undefined ? {} : { maxExpandedBytes }),
    });
  }

  call(handle: number, member: string | null, args: string): HostOutcome {
    const written: string[] = [];
    return this.#invoke(
      handle,
      (entry) => {
        if (member === null) {
          if (entry.shape.kind !== "function" || typeof entry.value !== "function") {
            throw new TypeError("value is not a function");
          }
          return {
            result: Reflect.apply(entry.value, undefined, this.#arguments(args, written)),
            type: entry.type.callResult,
          };
        }
        const target = this.#member(entry, member, "methods");
        if (typeof target !== "function") throw new TypeError(`${member} is not a function`);
        const type = memberType(entry, member).callResult;
        return { result: Reflect.apply(target, entry.value, this.#arguments(args, written)), type };
      },
      written,
    );
  }

  construct(handle: number, args: string): HostOutcome {
    const written: string[] = [];
    return this.#invoke(
      handle,
      (entry) => {
        if (entry.shape.kind !== "class" || this.#unconstructible(entry.value))
          throw new TypeError("value is not a constructor");
        const result = Reflect.construct(
          entry.value as new (
            ...args: unknown[]
          ) => unknown,
          this.#arguments(args, written),
        );
        return { result, type: entry.type.constructResult };
      },
      written,
    );
  }

  get(handle: number, property: string): HostOutcome {
    return this.#invoke(handle, (entry) => ({
      result: this.#member(entry, property, "properties"),
      type: memberType(entry, property),
    }));
  }

  /** `written`: filled with the strings of the call's arguments once decoded (a host error may echo them). */
  #invoke(
    handle: number,
    action: (entry: HandleEntry) => { result: unknown; type: DeclaredType | undefined },
    written: readonly string[] = [],
  ): HostOutcome {
    const entry = this.#entries.get(handle);
    if (!entry) return this.#error(new ReferenceError("this host object is no longer available"));
    let outcome: { result: unknown; type: DeclaredType | undefined };
    try {
      // `currentRunSignal()` is the run's: its log starts every call (RunLog `#withinRun`).
      outcome = action(entry);
    } catch (error) {
      return { kind: "error", wire: hostErrorWire(error, written) };
    }
    const type = outcome.type ?? NOTHING;
    if (isThenable(outcome.result)) {
      return {
        kind: "promise",
        settled: Promise.resolve(outcome.result).then(
          (value) => this.#value(value, type, inherited(entry.label)),
          (error: unknown) => ({ kind: "error" as const, wire: hostErrorWire(error, written) }),
        ),
      };
    }
    return this.#value(outcome.result, type, inherited(entry.label));
  }

  #value(
    value: unknown,
    type: DeclaredType,
    label: HandleLabel,
  ): { kind: "value"; wire: string } | { kind: "error"; wire: string } {
    this.#labelling = { kind: "result", caller: label };
    try {
      return { kind: "value", wire: redactErrorValues(this.encode(value, "result", type)) };
    } catch (error) {
      return { kind: "error", wire: hostErrorWire(error) };
    } finally {
      this.#labelling = { kind: "result", caller: {} };
    }
  }

  #error(error: unknown): HostOutcome {
    return { kind: "error", wire: hostErrorWire(error) };
  }

  #member(entry: HandleEntry, name: string, kind: "methods" | "properties"): unknown {
    if (!entry.shape[kind].includes(name)) {
      throw new TypeError(`${name} is not available on this object`);
    }
    return (entry.value as Record<string, unknown>)[name];
  }

  /**
   * A call's arguments for host code. A function or class handle becomes a function whose calls (and `new`) go
   * through the run's decisions, like the code's own calls: handing `moss.bank.transfer`'s kin to a host function
   * that calls it must not skip the approval the member demands.
   */
  /** Decodes a call's arguments; their strings are added to `written`. */
  #arguments(args: string, written: string[] = []): unknown[] {
    const decoded = decodeWire(args, {
      onHandle: (shape) => {
        const entry = this.#entries.get(shape.id);
        if (entry === undefined) return undefined;
        return typeof entry.value === "function" ? this.#callbackFor(shape.id, entry) : entry.value;
      },
    });
    const values = Array.isArray(decoded) ? decoded : [];
    written.push(...writtenStrings(values));
    return values;
  }

  #callbackFor(id: number, entry: HandleEntry): (...args: unknown[]) => unknown {
    let callback = this.#callbacks.get(id);
    if (callback !== undefined) return callback;
    const membrane = this;
    const construct = kindOf(entry.value) === "class";
    callback = function (this: unknown, ...args: unknown[]): unknown {
      if (construct !== (new.target !== undefined)) {
        throw new TypeError(
          construct ? "this class must be called with new" : "this function is not a constructor",
        );
      }
      return membrane.#settle(membrane.#route(construct ? "construct" : "call", id, membrane.encode(args)));
    };
    Object.defineProperty(callback, "name", { value: entry.label.name ?? "" });
    this.#callbacks.set(id, callback);
    this.#callbackHandles.set(callback, entry.value);
    return callback;
  }

  /** A routed call's outcome as host code sees it: the value, a thrown error, or a promise of either. */
  #settle(outcome: HostOutcome): unknown {
    const fromWire = (kind: string, wire: string): unknown => {
      if (kind === "value") return this.decode(wire);
      throw errorFromWire(this.decode(wire));
    };
    if (outcome.kind === "value" || outcome.kind === "error") return fromWire(outcome.kind, outcome.wire);
    if (outcome.kind === "promise") {
      return outcome.settled.then((settled) =>
        settled.kind === "pending" ? new Promise(() => {}) : fromWire(settled.kind, settled.wire),
      );
    }
    throw new Error(outcome.kind === "refuse" ? outcome.message : "the call waits for a person's decision");
  }

  #shapeOf(value: object, position: DeclaredType, path: string): HandleShape {
    const type =
      position.kind === "undeclared"
        ? (this.#nearestDeclaredClass(value) ?? NOTHING)
        : position.kind === "runtime"
          ? (this.#programClass(value) ?? RUNTIME)
          : position;
    const { label, origin } = this.#labelFor(value, path);
    const labelKey = `${label.service ?? ""}\u0000${label.name ?? ""}\u0000${origin ?? ""}`;
    let ids = this.#ids.get(value);
    let byLabel = ids?.get(type);
    const known = byLabel?.get(labelKey);
    if (known !== undefined) return this.#entries.get(known)!.shape;
    const id = this.#nextId++;
    let kind = kindOf(value);
    if (type.kind !== "runtime") {
      if (kind === "function" && type.callResult === undefined) kind = "object";
      if (kind === "class" && type.constructResult === undefined) kind = "object";
    }
    if (kind === "class" && this.#unconstructible(value)) kind = "object";
    const shape: HandleShape = { id, kind, methods: [], properties: [] };
    for (const name of memberNames(value, kindOf(value))) {
      if (type.kind !== "runtime" && !type.members.has(name)) continue;
      const member = safeRead(value, name);
      (typeof member === "function" ? shape.methods : shape.properties).push(name);
      if (
        typeof member === "function" &&
        type.kind !== "runtime" &&
        type.members.get(name)?.callPromise === true
      )
        (shape.asyncMethods ??= []).push(name);
    }
    if (!ids) {
      ids = new Map();
      this.#ids.set(value, ids);
    }
    if (!byLabel) {
      byLabel = new Map();
      ids.set(type, byLabel);
    }
    byLabel.set(labelKey, id);
    this.#entries.set(id, { value, shape, type, label, origin });
    return shape;
  }

  /**
   * The label of a new handle. Installed by the runtime: its position (a plain object's function by its key too).
   * Returned by a call: the service the call reached; an object the runtime installed keeps its field's name (the
   * caller's field when it is one of them), so reaching a service through another never renames it.
   */
  #labelFor(value: object, path: string): { label: HandleLabel; origin: string | undefined } {
    const labelling = this.#labelling;
    if (labelling.kind === "root") {
      if (path === labelling.rootPath) return { label: labelling.label, origin: path };
      const owner = labelling.label.service ?? labelling.label.name;
      const key = path.slice(path.lastIndexOf(".") + 1);
      return { label: { ...(owner === undefined ? {} : { service: owner }), name: key }, origin: path };
    }
    const roots = this.#roots.get(value);
    const caller = inherited(labelling.caller);
    if (roots === undefined) return { label: caller, origin: undefined };
    const own = roots.find((root) => (root.service ?? root.name) === caller.service) ?? roots[0]!;
    return { label: own, origin: undefined };
  }
}

/** How the encode in progress labels the handles it makes. */
type Labelling =
  | { kind: "root"; rootPath: string; label: HandleLabel }
  | { kind: "result"; caller: HandleLabel };

function sameLabel(a: HandleLabel, b: HandleLabel): boolean {
  return a.service === b.service && a.name === b.name;
}

/** An `Error` host code can catch, from the `{ name, message, code, fields }` a routed call failed with. */
function errorFromWire(decoded: unknown): Error {
  const record = (decoded ?? {}) as { name?: unknown; message?: unknown; code?: unknown; fields?: unknown };
  const error = new Error(typeof record.message === "string" ? record.message : "the call failed");
  if (typeof record.name === "string") error.name = record.name;
  const fields = typeof record.fields === "object" && record.fields !== null ? record.fields : {};
  Object.assign(error, fields, record.code === undefined ? {} : { code: record.code });
  return error;
}

/** What a call's result inherits: the service of the handle called (or its name, for a module function). */
function inherited(label: HandleLabel): HandleLabel {
  const service = label.service ?? label.name;
  return service === undefined ? {} : { service };
}

/** The declared type of a member's value on a handle (everything under a `runtime` handle is undeclared). */
function memberType(entry: HandleEntry, name: string): DeclaredType {
  if (entry.type.kind === "runtime") return UNDECLARED;
  return entry.type.members.get(name) ?? NOTHING;
}

/** How many levels of plain objects holding host functions are narrowed to their declared keys. */
const MAX_VIEW_DEPTH = 8;

/**
 * What the isolate may see of a plain object holding host functions (a service or visible value written as an
 * object literal, a record of callbacks) at a position declared with a shape: only the keys its declared type names.
 * Without this, its undeclared keys crossed as data, with their values (an `apiKey` the interface never showed).
 * Plain data without functions is copied whole, as before; so are index signatures and undeclared positions.
 */
function declaredView(value: unknown, type: DeclaredType, depth = 0): unknown {
  if (depth > MAX_VIEW_DEPTH || type.kind !== "declared" || type.rest !== NOTHING) return value;
  if (value === null || typeof value !== "object" || isErrorValue(value)) return value;
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return value;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  const holdsFunctions = keys.some((key) => {
    const descriptor = Object.getOwnPropertyDescriptor(record, key);
    return descriptor !== undefined && "value" in descriptor && typeof descriptor.value === "function";
  });
  const view: Record<string, unknown> = {};
  let changed = holdsFunctions;
  for (const key of keys) {
    const memberType = type.members.get(key);
    if (memberType === undefined || !isReachableName(key)) {
      if (holdsFunctions) continue;
      view[key] = record[key];
      continue;
    }
    const descriptor = Object.getOwnPropertyDescriptor(record, key);
    if (descriptor === undefined || !("value" in descriptor)) {
      view[key] = record[key];
      continue;
    }
    const child = declaredView(descriptor.value, memberType, depth + 1);
    changed ||= child !== descriptor.value;
    view[key] = child;
  }
  return changed ? view : value;
}

/**
 * Walks the plain-data part of a value (arrays, plain objects, maps, sets) along its declared type and records the
 * declared type of each host object found in it. Undefined when nothing needs recording (an undeclared root).
 */
function typeHostObjects(root: unknown, rootType: DeclaredType): Map<object, DeclaredType> | undefined {
  if (rootType.kind === "undeclared" || root === null) return undefined;
  if (typeof root !== "object" && typeof root !== "function") return undefined;
  const types = new Map<object, DeclaredType>();
  const seen = new Set<object>();
  const visit = (value: unknown, type: DeclaredType): void => {
    if (value === null || (typeof value !== "object" && typeof value !== "function")) return;
    if (type.kind === "undeclared" || seen.has(value)) return;
    seen.add(value);
    if (Array.isArray(value)) {
      for (const item of value) visit(item, type.element);
      return;
    }
    if (value instanceof Map) {
      for (const item of value.values()) visit(item, type.element);
      return;
    }
    if (value instanceof Set) {
      for (const item of value) visit(item, type.element);
      return;
    }
    const prototype = typeof value === "object" ? Object.getPrototypeOf(value) : undefined;
    if ((prototype === Object.prototype || prototype === null) && !isErrorValue(value)) {
      for (const key of Object.keys(value)) {
        const descriptor = Object.getOwnPropertyDescriptor(value, key);
        if (descriptor && "value" in descriptor) visit(descriptor.value, type.members.get(key) ?? type.rest);
      }
      return;
    }
    if (!types.has(value)) types.set(value, type);
  };
  visit(root, rootType);
  return types;
}

function isErrorValue(value: object): boolean {
  return Object.prototype.toString.call(value) === "[object Error]";
}

function kindOf(value: object): HandleShape["kind"] {
  if (typeof value !== "function") return "object";
  return /^class[\s{]/.test(Function.prototype.toString.call(value)) ? "class" : "function";
}

/** Own and inherited string-named members, stopping at the built-in prototypes. */
function memberNames(value: object, kind: HandleShape["kind"]): string[] {
  const names = new Set<string>();
  const stop = new Set<unknown>([Object.prototype, Function.prototype, null]);
  for (
    let current: object | null = value;
    current && !stop.has(current);
    current = Object.getPrototypeOf(current)
  ) {
    if (kind !== "object" && current !== value) break;
    for (const name of Object.getOwnPropertyNames(current)) {
      if (!isReachableName(name)) continue;
      if (kind !== "object" && (name === "length" || name === "name")) continue;
      names.add(name);
    }
  }
  return [...names].sort();
}

function safeRead(value: object, name: string): unknown {
  const descriptor = findDescriptor(value, name);
  return descriptor && "value" in descriptor ? descriptor.value : undefined;
}

function findDescriptor(value: object, name: string): PropertyDescriptor | undefined {
  for (let current: object | null = value; current; current = Object.getPrototypeOf(current)) {
    const descriptor = Object.getOwnPropertyDescriptor(current, name);
    if (descriptor) return descriptor;
  }
  return undefined;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === "object" || typeof value === "function") &&
    typeof (value as { then?: unknown }).then === "function"
  );
}
