import { decodeWire, encodeWire } from "../../engine/membrane/host/host-wire.ts";
import type { HandleShape, HostMembrane, HostOutcome, SessionSetup } from "../../engine/sandbox/sandbox.ts";

/** A small real membrane over host objects: handles by id, public members only, errors as {name, message}. */
export class TestMembrane implements HostMembrane {
  readonly calls: string[] = [];
  readonly #values = new Map<number, { value: object; shape: HandleShape }>();
  readonly #ids = new WeakMap<object, number>();
  #next = 1;

  encode(value: unknown): string {
    return encodeWire(value, { onHostObject: (object) => this.shape(object) });
  }

  decode(text: string): unknown {
    return decodeWire(text, { onHandle: (shape) => this.#values.get(shape.id)?.value });
  }

  shape(value: object): HandleShape {
    const known = this.#ids.get(value);
    if (known !== undefined) return this.#values.get(known)!.shape;
    const id = this.#next++;
    const isFunction = typeof value === "function";
    const kind = isFunction
      ? /^class\b/.test(Function.prototype.toString.call(value))
        ? "class"
        : "function"
      : "object";
    const methods = new Set<string>();
    const properties = new Set<string>();
    const visible = (name: string) =>
      name !== "constructor" && !name.startsWith("_") && !name.startsWith("#");
    if (!isFunction) {
      for (
        let current: object | null = value;
        current && current !== Object.prototype;
        current = Object.getPrototypeOf(current)
      ) {
        for (const name of Object.getOwnPropertyNames(current)) {
          if (!visible(name)) continue;
          const descriptor = Object.getOwnPropertyDescriptor(current, name)!;
          if (typeof descriptor.value === "function") methods.add(name);
          else properties.add(name);
        }
      }
    }
    const shape: HandleShape = { id, kind, methods: [...methods], properties: [...properties] };
    this.#ids.set(value, id);
    this.#values.set(id, { value, shape });
    return shape;
  }

  call(handle: number, member: string | null, args: string): HostOutcome {
    this.calls.push(`call ${member ?? "(self)"}`);
    return this.#invoke(handle, (entry) => {
      if (member === null) return Reflect.apply(entry.value as Function, undefined, this.#args(args));
      if (!entry.shape.methods.includes(member)) throw new TypeError(`${member} is not available`);
      return Reflect.apply((entry.value as Record<string, Function>)[member]!, entry.value, this.#args(args));
    });
  }

  construct(handle: number, args: string): HostOutcome {
    this.calls.push("construct");
    return this.#invoke(handle, (entry) =>
      Reflect.construct(entry.value as new (...args: unknown[]) => object, this.#args(args)),
    );
  }

  get(handle: number, property: string): HostOutcome {
    this.calls.push(`get ${property}`);
    return this.#invoke(handle, (entry) => {
      if (!entry.shape.properties.includes(property)) throw new TypeError(`${property} is not available`);
      return (entry.value as Record<string, unknown>)[property];
    });
  }

  #args(text: string): unknown[] {
    return this.decode(text) as unknown[];
  }

  #invoke(handle: number, action: (entry: { value: object; shape: HandleShape }) => unknown): HostOutcome {
    const entry = this.#values.get(handle);
    if (entry === undefined)
      return { kind: "error", wire: encodeWire({ name: "ReferenceError", message: "unknown handle" }) };
    try {
      const result = action(entry);
      if (result instanceof Promise) {
        return {
          kind: "promise",
          settled: result.then(
            (value) => ({ kind: "value" as const, wire: this.encode(value) }),
            (error: Error) => ({
              kind: "error" as const,
              wire: encodeWire({ name: error.name, message: error.message }),
            }),
          ),
        };
      }
      return { kind: "value", wire: this.encode(result) };
    } catch (error) {
      const { name, message } = error as Error;
      return { kind: "error", wire: encodeWire({ name, message }) };
    }
  }

  /** Builds a session setup: `globals` and `mossServices` become proxies, `mossData` plain isolate values. */
  setup(
    globals: Record<string, unknown>,
    mossData: Record<string, unknown>,
    mossServices: Record<string, object | undefined>,
  ): SessionSetup {
    return {
      globals: this.encode(globals),
      mossData: encodeWire(mossData),
      mossServices: this.encode(mossServices),
      dataFields: Object.keys(mossData),
    };
  }
}

/** A host service with sync and async methods, one that throws, and one returning a further host object. */
export class Ball {
  position = { x: 0, y: 0 };
  readonly label: string;
  _secret = "hidden";

  constructor(label = "ball") {
    this.label = label;
  }

  move(dx: number, dy: number): { x: number; y: number } {
    this.position = { x: this.position.x + dx, y: this.position.y + dy };
    return this.position;
  }

  async roll(distance: number): Promise<number> {
    await new Promise((resolve) => setTimeout(resolve, 1));
    return distance * 2;
  }

  async ping<T>(value: T): Promise<T> {
    return value;
  }

  fail(): never {
    throw new TypeError("cannot fail at /home/secret/ball.ts:12");
  }

  async failLater(): Promise<never> {
    await Promise.resolve();
    throw new RangeError("rolled off the table");
  }

  spawn(label: string): Ball {
    return new Ball(label);
  }

  echo<T>(value: T): T {
    return value;
  }

  never(): Promise<never> {
    return new Promise(() => {});
  }

  _hiddenMethod(): string {
    return "secret";
  }
}
