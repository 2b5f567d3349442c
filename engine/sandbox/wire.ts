import type { HandleShape } from "./sandbox.ts";

/*
 * The wire encoding: everything that crosses host <-> sandbox process <-> isolate is a string in this format.
 *
 * The text is a JSON array of nodes; node 0 is the root. A node is a JSON string, boolean, null or finite
 * number standing for itself, or a tagged array whose children are indices of other nodes (so shared and
 * cyclic references survive):
 *   ["U"] undefined · ["N", "NaN" | "Infinity" | "-Infinity" | "-0"] · ["B", digits] bigint
 *   ["A", i...] array · ["O", key, i, key, i...] plain object · ["D", ms | null] Date · ["R", source, flags]
 *   ["M", k, v, ...] Map · ["S", i...] Set · ["E", name, message, code?] Error · ["H", shape] host handle
 *
 * `createWireCodec` is self-contained: its `.toString()` is evaluated inside the isolate bootstrap, where it
 * captures the intrinsics before model code runs. It may reference nothing from module scope.
 */

/** What the codec reports about a value it cannot encode: its path (e.g. `moss.callback`) and what it is. */
export interface WireUnsupported {
  path: string;
  description: string;
}

/** Options of the raw codec `encode` (shared by the host module and the isolate bootstrap). */
export interface WireEncodeOptions {
  /** Path of the root in messages, e.g. `moss.notes` or `argument 0`. Default `value`. */
  rootPath?: string;
  /** Consulted first for every object: a handle for a known proxy, `null` for one that may not cross here. */
  knownHandle?: (value: object) => HandleShape | null | undefined;
  /** Turns a value that is not plain data into a handle, or returns undefined when it cannot cross. */
  handleOf?: (value: object, path: string) => HandleShape | undefined;
  /** Receives values that cannot cross; they are left out (undefined in arrays). Without it, encoding throws. */
  onUnsupported?: (unsupported: WireUnsupported) => void;
  /** Upper bound on the encoded length in characters; beyond it a `WireLimitError` is thrown. */
  maxLength?: number;
}

/** Options of the raw codec `decode`. */
export interface WireDecodeOptions {
  /** Builds the value standing for a handle (a proxy inside the isolate, the host object on the host). */
  onHandle?: (shape: HandleShape) => unknown;
}

/** The codec produced by `createWireCodec`. */
export interface WireCodec {
  encode(value: unknown, options?: WireEncodeOptions): string;
  decode(text: string, options?: WireDecodeOptions): unknown;
  /** Readable description of a value that cannot cross ("a function", "an instance of Point", ...). */
  describe(value: unknown): string;
}

/** Builds the wire codec from the intrinsics of the realm it runs in; self-contained (see the file comment). */
export function createWireCodec(): WireCodec {
  const ReflectApply = Reflect.apply;
  const ReflectDefineProperty = Reflect.defineProperty;
  const ReflectGetPrototypeOf = Reflect.getPrototypeOf;
  const ReflectSetPrototypeOf = Reflect.setPrototypeOf;
  const ObjectKeys = Object.keys;
  const ObjectPrototype = Object.prototype;
  const ObjectCreate = Object.create;
  const ArrayPrototype = Array.prototype;
  const Uint8ArrayCtor = Uint8Array;
  const ArrayIsArray = Array.isArray;
  const JSONStringify = JSON.stringify;
  const JSONParse = JSON.parse;
  const NumberIsFinite = Number.isFinite;
  const NumberIsInteger = Number.isInteger;
  const ObjectIs = Object.is;
  const StringCtor = String;
  const BigIntCtor = BigInt;
  const DateCtor = Date;
  const RegExpCtor = RegExp;
  const MapCtor = Map;
  const SetCtor = Set;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const DateGetTime = Date.prototype.getTime;
  const RegExpSource = Object.getOwnPropertyDescriptor(RegExp.prototype, "source")!.get!;
  const RegExpFlags = Object.getOwnPropertyDescriptor(RegExp.prototype, "flags")!.get!;
  const MapSize = Object.getOwnPropertyDescriptor(Map.prototype, "size")!.get!;
  const SetSize = Object.getOwnPropertyDescriptor(Set.prototype, "size")!.get!;
  const MapEntries = Map.prototype.entries;
  const MapSet = Map.prototype.set;
  const MapGet = Map.prototype.get;
  const SetValues = Set.prototype.values;
  const SetAdd = Set.prototype.add;
  const IteratorNext = Object.getPrototypeOf(new Map().entries()).next;
  const SetIteratorNext = Object.getPrototypeOf(new Set().values()).next;
  const ObjectToString = Object.prototype.toString;
  const FunctionToString = Function.prototype.toString;
  const errorConstructors: Record<string, ErrorConstructor> = {
    __proto__: null,
    Error,
    TypeError,
    RangeError,
    SyntaxError,
    ReferenceError,
    EvalError,
    URIError,
  } as unknown as Record<string, ErrorConstructor>;

  function define(target: object, key: PropertyKey, value: unknown): void {
    ReflectDefineProperty(target, key, {
      __proto__: null,
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    } as PropertyDescriptor);
  }

  /**
   * A wire node: an array without a prototype, so writing into it with plain assignment can never reach a setter
   * that model code planted on `Array.prototype`, and `JSON.stringify` finds no inherited `toJSON` on it.
   */
  function nullArray(...items: unknown[]): unknown[] {
    ReflectSetPrototypeOf(items, null);
    return items;
  }

  /** A prototype-less copy of a handle shape (copied by index: no iterator model code could have replaced). */
  function plainShape(shape: HandleShape): HandleShape {
    const copy = ObjectCreate(null) as HandleShape;
    copy.id = shape.id;
    copy.kind = shape.kind;
    copy.methods = copyStrings(shape.methods);
    copy.properties = copyStrings(shape.properties);
    return copy;
  }

  function copyStrings(list: readonly string[]): string[] {
    const copy = nullArray() as string[];
    for (let i = 0; i < list.length; i++) copy[i] = StringCtor(list[i]);
    return copy;
  }

  function hasBrand(method: Function, value: unknown): boolean {
    try {
      ReflectApply(method, value, []);
      return true;
    } catch {
      return false;
    }
  }

  function isErrorLike(value: object): boolean {
    return ReflectApply(ObjectToString, value, []) === "[object Error]";
  }

  function isPlainObject(value: object): boolean {
    const prototype = ReflectGetPrototypeOf(value);
    return prototype === ObjectPrototype || prototype === null;
  }

  function constructorName(value: object): string | undefined {
    try {
      const prototype = ReflectGetPrototypeOf(value) as { constructor?: unknown } | null;
      const ctor = prototype?.constructor;
      if (typeof ctor === "function" && typeof ctor.name === "string" && ctor.name !== "") return ctor.name;
    } catch {}
    return undefined;
  }

  function describe(value: unknown): string {
    if (typeof value === "function") {
      let source = "";
      try {
        source = ReflectApply(FunctionToString, value, []) as string;
      } catch {}
      if (source.startsWith("class")) return "a class";
      return "a function";
    }
    if (typeof value === "symbol") return "a symbol";
    if (typeof value === "object" && value !== null) {
      if (typeof (value as { then?: unknown }).then === "function") return "a Promise (await it first)";
      const name = constructorName(value);
      return name === undefined ? "an object that is not plain data" : `an instance of ${name}`;
    }
    return `a ${typeof value}`;
  }

  function encode(root: unknown, options: WireEncodeOptions = {}): string {
    const nodes = nullArray();
    const seen = new MapCtor<unknown, number>();
    const handleOf = options.handleOf;
    const knownHandle = options.knownHandle;
    const onUnsupported = options.onUnsupported;
    const maxLength = options.maxLength ?? Infinity;
    const rootPath = options.rootPath ?? "value";
    // Where the visit is: numbers are array indices, strings object keys, [text] a literal segment. A path string is
    // only built when something is reported, so large values pay nothing for it.
    const segments = nullArray();
    let length = 2;

    function charge(amount: number): void {
      length += amount;
      if (length > maxLength) {
        const error = new ErrorCtor(`encoded value exceeds the limit of ${maxLength} characters`);
        error.name = "WireLimitError";
        throw error;
      }
    }

    function currentPath(): string {
      let path = rootPath;
      for (let i = 0; i < segments.length; i++) {
        const segment = segments[i];
        if (typeof segment === "number") path = `${path}[${segment}]`;
        else if (typeof segment === "string") path = path === "" ? segment : `${path}.${segment}`;
        else path = `${path}${(segment as string[])[0]}`;
      }
      return path;
    }

    function push(node: unknown): number {
      const index = nodes.length;
      nodes[index] = node;
      return index;
    }

    function visitAt(segment: unknown, value: unknown): number {
      segments[segments.length] = segment;
      const index = visit(value);
      segments.length--;
      return index;
    }

    // Returns the node index, or -1 when the value cannot cross (reported through onUnsupported).
    function visit(value: unknown): number {
      switch (typeof value) {
        case "string":
          charge(value.length + 3);
          return push(value);
        case "boolean":
          charge(6);
          return push(value);
        case "number":
          charge(24);
          if (NumberIsFinite(value) && !ObjectIs(value, -0)) return push(value);
          return push(nullArray("N", ObjectIs(value, -0) ? "-0" : StringCtor(value)));
        case "bigint":
          charge(24);
          return push(nullArray("B", StringCtor(value)));
        case "undefined":
          charge(6);
          return push(nullArray("U"));
        case "object":
        case "function":
          break;
        default:
          return unsupported(value);
      }
      if (value === null) {
        charge(5);
        return push(null);
      }
      const known = ReflectApply(MapGet, seen, [value]) as number | undefined;
      if (known !== undefined) return known;
      const object = value as object;
      if (knownHandle !== undefined) {
        const shape = knownHandle(object);
        if (shape === null) return unsupported(object, "a host object");
        if (shape !== undefined) return registerHandle(object, shape);
      }
      if (typeof object === "function") return handleOrUnsupported(object);
      charge(8);
      if (ArrayIsArray(object)) {
        const node = nullArray("A");
        const index = register(object, node);
        const items = object as unknown[];
        const count = items.length;
        for (let i = 0; i < count; i++) {
          const item = visitAt(i, items[i]);
          node[node.length] = item === -1 ? visit(undefined) : item;
        }
        return index;
      }
      // Plain data first: brand checks throw for every other object, which made large values very slow.
      if (isPlainObject(object) && !isErrorLike(object)) return encodePlainObject(object);
      const tag = ReflectApply(ObjectToString, object, []) as string;
      if (tag === "[object Date]" && hasBrand(DateGetTime, object)) {
        const time = ReflectApply(DateGetTime, object, []) as number;
        return register(object, nullArray("D", NumberIsFinite(time) ? time : null));
      }
      if (tag === "[object RegExp]" && hasBrand(RegExpSource, object)) {
        const source = ReflectApply(RegExpSource, object, []) as string;
        const flags = ReflectApply(RegExpFlags, object, []) as string;
        charge(source.length + flags.length);
        return register(object, nullArray("R", source, flags));
      }
      if (tag === "[object Map]" && hasBrand(MapSize, object)) {
        const node = nullArray("M");
        const index = register(object, node);
        const iterator = ReflectApply(MapEntries, object, []);
        let position = 0;
        for (;;) {
          const step = ReflectApply(IteratorNext, iterator, []) as IteratorResult<[unknown, unknown]>;
          if (step.done) break;
          const key = visitAt([`.<key ${position}>`], step.value[0]);
          const entryValue = visitAt([`.get(${describeKey(step.value[0])})`], step.value[1]);
          position++;
          if (key === -1 || entryValue === -1) continue;
          node[node.length] = key;
          node[node.length] = entryValue;
        }
        return index;
      }
      if (tag === "[object Set]" && hasBrand(SetSize, object)) {
        const node = nullArray("S");
        const index = register(object, node);
        const iterator = ReflectApply(SetValues, object, []);
        let position = 0;
        for (;;) {
          const step = ReflectApply(SetIteratorNext, iterator, []) as IteratorResult<unknown>;
          if (step.done) break;
          const item = visitAt([`.<item ${position}>`], step.value);
          position++;
          if (item !== -1) node[node.length] = item;
        }
        return index;
      }
      if (isErrorLike(object)) {
        const error = object as { name?: unknown; message?: unknown; code?: unknown };
        const name = StringCtor(error.name ?? "Error");
        const message = StringCtor(error.message ?? "");
        charge(name.length + message.length);
        const node = nullArray("E", name, message);
        const code = error.code;
        if (typeof code === "string" || typeof code === "number") node[3] = code;
        return register(object, node);
      }
      return handleOrUnsupported(object);
    }

    function encodePlainObject(object: object): number {
      const node = nullArray("O");
      const index = register(object, node);
      const keys = ObjectKeys(object);
      const record = object as Record<string, unknown>;
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        const child = visitAt(key, record[key]);
        if (child === -1) continue;
        charge(key.length + 3);
        node[node.length] = key;
        node[node.length] = child;
      }
      return index;
    }

    function register(object: object, node: unknown[]): number {
      const index = push(node);
      ReflectApply(MapSet, seen, [object, index]);
      return index;
    }

    function handleOrUnsupported(object: object): number {
      const shape = handleOf === undefined ? undefined : handleOf(object, currentPath());
      if (shape === undefined) return unsupported(object);
      return registerHandle(object, shape);
    }

    function registerHandle(object: object, shape: HandleShape): number {
      charge(64);
      return register(object, nullArray("H", plainShape(shape)));
    }

    function unsupported(value: unknown, description = describe(value)): number {
      const path = currentPath();
      if (onUnsupported === undefined) {
        throw new TypeErrorCtor(`${path} is ${description} and cannot be copied`);
      }
      onUnsupported({ path, description });
      return -1;
    }

    if (visit(root) === -1) push(nullArray("U"));
    return JSONStringify(nodes);
  }

  function describeKey(key: unknown): string {
    return typeof key === "string"
      ? JSONStringify(key)
      : StringCtor(typeof key === "symbol" ? "symbol" : key);
  }

  function decode(text: string, options: WireDecodeOptions = {}): unknown {
    let nodes: unknown;
    try {
      nodes = JSONParse(text);
    } catch (error) {
      throw new TypeErrorCtor(`invalid wire text: ${(error as Error).message}`);
    }
    if (!ArrayIsArray(nodes) || nodes.length === 0)
      throw new TypeErrorCtor("invalid wire text: expected a non-empty array");
    const table = nodes as unknown[];
    const values = nullArray();
    const built = new Uint8ArrayCtor(table.length);
    const onHandle = options.onHandle;

    function child(index: unknown): unknown {
      if (typeof index !== "number" || !NumberIsInteger(index) || index < 0 || index >= table.length) {
        throw new TypeErrorCtor(`invalid wire text: bad node index ${StringCtor(index)}`);
      }
      if (built[index] === 1) return values[index];
      return build(index);
    }

    function remember(index: number, value: unknown): unknown {
      values[index] = value;
      built[index] = 1;
      return value;
    }

    function build(index: number): unknown {
      const node = table[index];
      if (
        node === null ||
        typeof node === "string" ||
        typeof node === "number" ||
        typeof node === "boolean"
      ) {
        return remember(index, node);
      }
      if (!ArrayIsArray(node) || typeof node[0] !== "string")
        throw new TypeErrorCtor(`invalid wire text: bad node ${index}`);
      const parts = node as unknown[];
      switch (parts[0]) {
        case "U":
          return remember(index, undefined);
        case "N": {
          const special = parts[1];
          const value =
            special === "-0"
              ? -0
              : special === "NaN"
                ? NaN
                : special === "Infinity"
                  ? Infinity
                  : special === "-Infinity"
                    ? -Infinity
                    : fail(index);
          return remember(index, value);
        }
        case "B":
          if (typeof parts[1] !== "string") fail(index);
          return remember(index, BigIntCtor(parts[1] as string));
        case "A": {
          // Filled while prototype-less (plain assignment reaches no setter), then given its real prototype.
          const array = nullArray();
          remember(index, array);
          for (let i = 1; i < parts.length; i++) array[i - 1] = child(parts[i]);
          ReflectSetPrototypeOf(array, ArrayPrototype);
          return array;
        }
        case "O": {
          // Prototype-less while filled, so a "__proto__" key stays an ordinary own property.
          const object = ObjectCreate(null) as Record<string, unknown>;
          remember(index, object);
          for (let i = 1; i + 1 < parts.length; i += 2) {
            if (typeof parts[i] !== "string") fail(index);
            object[parts[i] as string] = child(parts[i + 1]);
          }
          ReflectSetPrototypeOf(object, ObjectPrototype);
          return object;
        }
        case "D":
          return remember(index, new DateCtor(typeof parts[1] === "number" ? parts[1] : NaN));
        case "R":
          return remember(index, new RegExpCtor(StringCtor(parts[1]), StringCtor(parts[2])));
        case "M": {
          const map = new MapCtor<unknown, unknown>();
          remember(index, map);
          for (let i = 1; i + 1 < parts.length; i += 2)
            ReflectApply(MapSet, map, [child(parts[i]), child(parts[i + 1])]);
          return map;
        }
        case "S": {
          const set = new SetCtor<unknown>();
          remember(index, set);
          for (let i = 1; i < parts.length; i++) ReflectApply(SetAdd, set, [child(parts[i])]);
          return set;
        }
        case "E": {
          const name = StringCtor(parts[1]);
          const ctor = errorConstructors[name] ?? ErrorCtor;
          const error = new ctor(StringCtor(parts[2])) as Error & { code?: unknown };
          if (ctor === ErrorCtor && name !== "Error") define(error, "name", name);
          error.stack = `${name}: ${StringCtor(parts[2])}`;
          if (parts.length > 3) define(error, "code", parts[3]);
          return remember(index, error);
        }
        case "H": {
          const shape = parts[1] as HandleShape;
          if (onHandle === undefined)
            throw new TypeErrorCtor("invalid wire text: a handle where none is accepted");
          if (typeof shape !== "object" || shape === null || typeof shape.id !== "number") fail(index);
          return remember(index, onHandle(shape));
        }
        default:
          return fail(index);
      }
    }

    function fail(index: number): never {
      throw new TypeErrorCtor(`invalid wire text: bad node ${index}`);
    }

    return child(0);
  }

  return { encode, decode, describe };
}

/** Source text of `createWireCodec`, evaluated inside the isolate bootstrap. */
export const wireCodecSource: string = createWireCodec.toString();

const hostCodec = createWireCodec();

/** Host-side options of `encodeWire`. */
export interface EncodeWireOptions {
  /** Registers a host object that is not plain data with the membrane and returns its handle shape. */
  onHostObject?: (value: object, path: string) => HandleShape | undefined;
  /** Receives values that cannot cross (they are left out); without it `encodeWire` throws a TypeError. */
  onUnsupported?: (unsupported: WireUnsupported) => void;
  /** Path of the root in messages. Default `value`. */
  rootPath?: string;
}

/** Encodes a host value into wire text; host objects become handles through `onHostObject`. */
export function encodeWire(value: unknown, options: EncodeWireOptions = {}): string {
  return hostCodec.encode(value, {
    rootPath: options.rootPath,
    handleOf: options.onHostObject,
    onUnsupported: options.onUnsupported,
  });
}

/** Host-side options of `decodeWire`. */
export interface DecodeWireOptions {
  /** Resolves a handle coming back from the isolate to the host object it stands for. */
  onHandle?: (shape: HandleShape) => unknown;
}

/** Decodes wire text on the host; throws a TypeError naming the problem for malformed text. */
export function decodeWire(text: string, options: DecodeWireOptions = {}): unknown {
  return hostCodec.decode(text, { onHandle: options.onHandle });
}

/** Describes a value that cannot cross, e.g. "a function" or "an instance of Point". */
export function describeUnsupported(value: unknown): string {
  return hostCodec.describe(value);
}
