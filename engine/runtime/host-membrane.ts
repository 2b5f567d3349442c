import type { HandleShape, HostMembrane as HostMembraneContract, HostOutcome } from "../sandbox/sandbox.ts";
import { decodeWire, encodeWire } from "../sandbox/wire.ts";

const NEVER_EXPOSED = new Set([
  "constructor",
  "prototype",
  "__proto__",
  "__prompt__",
  "__class_prompt__",
  "caller",
  "callee",
  "arguments",
  // Injection lifecycle hooks belong to the runtime: model code calling onDestroy() would tear a service down early.
  "onInject",
  "onDestroy",
]);

interface HandleEntry {
  value: object;
  shape: HandleShape;
}

/**
 * The host side of the membrane: host objects model code may reach are registered as handles; each call from the
 * isolate names a handle and a member, and only public members are callable. Arguments and results cross as wire
 * text; host objects that are not plain data cross as further handles.
 */
export class HostMembrane implements HostMembraneContract {
  readonly #entries = new Map<number, HandleEntry>();
  readonly #ids = new WeakMap<object, number>();
  readonly #allowed = new WeakMap<object, ReadonlySet<string>>();
  readonly #allowedByPrototype = new WeakMap<object, ReadonlySet<string>>();
  readonly #declaredMembers: ((value: object) => readonly string[] | undefined) | undefined;
  #nextId = 1;

  /** `declaredMembers` gives the public members of objects exposed without a declared type (returned objects). */
  constructor(options: { declaredMembers?: (value: object) => readonly string[] | undefined } = {}) {
    this.#declaredMembers = options.declaredMembers;
  }

  /**
   * Marks a value as reachable with only `members` (the public members its declared type shows); returns it.
   * Other instances of an exposed object's class (e.g. built with `new` from model code) get the same members.
   */
  expose<T>(value: T, members?: readonly string[]): T {
    if (members && value !== null && (typeof value === "object" || typeof value === "function")) {
      const allowed = new Set(members);
      this.#allowed.set(value as object, allowed);
      const prototype = typeof value === "object" ? Object.getPrototypeOf(value) : null;
      if (prototype !== null && prototype !== Object.prototype) {
        const known = this.#allowedByPrototype.get(prototype);
        this.#allowedByPrototype.set(
          prototype,
          known ? new Set([...known].filter((name) => allowed.has(name))) : allowed,
        );
      }
    }
    return value;
  }

  /** Encodes a host value for the isolate. */
  encode(value: unknown, rootPath?: string): string {
    return encodeWire(value, { rootPath, onHostObject: (object) => this.#shapeOf(object) });
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
    return this.#invoke(handle, (entry) => {
      const target = member === null ? entry.value : this.#member(entry, member, "methods");
      if (typeof target !== "function" || (member === null && entry.shape.kind !== "function")) {
        throw new TypeError(`${member ?? "value"} is not a function`);
      }
      return Reflect.apply(target, member === null ? undefined : entry.value, this.#arguments(args));
    });
  }

  construct(handle: number, args: string): HostOutcome {
    return this.#invoke(handle, (entry) => {
      if (entry.shape.kind !== "class") throw new TypeError("value is not a constructor");
      return Reflect.construct(entry.value as new (...args: unknown[]) => unknown, this.#arguments(args));
    });
  }

  get(handle: number, property: string): HostOutcome {
    return this.#invoke(handle, (entry) => this.#member(entry, property, "properties"));
  }

  #invoke(handle: number, action: (entry: HandleEntry) => unknown): HostOutcome {
    const entry = this.#entries.get(handle);
    if (!entry) return this.#error(new ReferenceError("this host object is no longer available"));
    let result: unknown;
    try {
      result = action(entry);
    } catch (error) {
      return this.#error(error);
    }
    if (isThenable(result)) {
      return {
        kind: "promise",
        settled: Promise.resolve(result).then(
          (value) => this.#value(value),
          (error: unknown) => ({ kind: "error" as const, wire: this.#errorWire(error) }),
        ),
      };
    }
    return this.#value(result);
  }

  #value(value: unknown): { kind: "value"; wire: string } | { kind: "error"; wire: string } {
    try {
      return { kind: "value", wire: this.encode(value, "result") };
    } catch (error) {
      return { kind: "error", wire: this.#errorWire(error) };
    }
  }

  #error(error: unknown): HostOutcome {
    return { kind: "error", wire: this.#errorWire(error) };
  }

  #errorWire(error: unknown): string {
    const name = error instanceof Error ? error.name : "Error";
    const message = error instanceof Error ? error.message : String(error);
    return encodeWire({ name, message: stripHostPaths(message) });
  }

  #member(entry: HandleEntry, name: string, kind: "methods" | "properties"): unknown {
    if (!entry.shape[kind].includes(name)) {
      throw new TypeError(`${name} is not available on this object`);
    }
    return (entry.value as Record<string, unknown>)[name];
  }

  #arguments(args: string): unknown[] {
    const decoded = this.decode(args);
    return Array.isArray(decoded) ? decoded : [];
  }

  #shapeOf(value: object): HandleShape {
    const known = this.#ids.get(value);
    if (known !== undefined) return this.#entries.get(known)!.shape;
    const id = this.#nextId++;
    const allowed =
      this.#allowed.get(value) ??
      (typeof value === "object" ? this.#allowedByPrototype.get(Object.getPrototypeOf(value)) : undefined) ??
      declaredSet(this.#declaredMembers?.(value));
    const shape: HandleShape = { id, kind: kindOf(value), methods: [], properties: [] };
    for (const name of memberNames(value, shape.kind)) {
      if (allowed && !allowed.has(name)) continue;
      const member = safeRead(value, name);
      (typeof member === "function" ? shape.methods : shape.properties).push(name);
    }
    this.#ids.set(value, id);
    this.#entries.set(id, { value, shape });
    return shape;
  }
}

function declaredSet(members: readonly string[] | undefined): ReadonlySet<string> | undefined {
  return members === undefined ? undefined : new Set(members);
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
      if (NEVER_EXPOSED.has(name) || name.startsWith("_") || name.startsWith("#")) continue;
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

/** Host error messages may carry absolute paths; the model sees only the file name. */
function stripHostPaths(message: string): string {
  return message.replace(/(?:file:\/\/)?(?:\/[\w.@-]+)+\/([\w.@-]+)/g, "$1");
}
