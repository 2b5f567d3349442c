import type { HandleShape } from "../protocol.ts";
import type { WireEncodeOptions, WireFieldsOptions, WireUnsupported } from "./codec.ts";
import {
  ArrayIsArray,
  BigIntToString,
  DateGetTime,
  IteratorNext,
  JSONStringify,
  MapCtor,
  MapDelete,
  MapEntries,
  MapGet,
  MapSet,
  MapSize,
  NumberIsFinite,
  ObjectHasOwn,
  ObjectIs,
  ObjectKeys,
  ObjectLookupGetter,
  ObjectToString,
  ReflectApply,
  ReflectGetPrototypeOf,
  RegExpFlagGetters,
  RegExpFlags,
  RegExpSource,
  SetIteratorNext,
  SetSize,
  SetValues,
  StringCtor,
  TypeErrorCtor,
} from "./intrinsics.ts";
import { createMeasurer } from "./measure.ts";
import { encodePrimitive } from "./primitive-wire.ts";
import {
  binaryOf,
  describe,
  hasBrand,
  isErrorLike,
  isLimit,
  isPlainObject,
  limitError,
  MAX_BIGINT_DIGITS,
  MAX_DEPTH,
  messageOf,
  nullArray,
  plainShape,
  toBase64,
} from "./values.ts";

// ---- encode -------------------------------------------------------------------------------------------------
/** A bigint's decimal digits, refused past MAX_BIGINT_DIGITS before the (quadratic) decimal conversion. */
function bigintDigits(value: bigint): string {
  // Decimal conversion is quadratic: a hexadecimal one (linear) tells the size first.
  const hex = ReflectApply(BigIntToString, value, [16]) as string;
  const tooLong = limitError(`holds a bigint of more than ${MAX_BIGINT_DIGITS} digits`);
  if ((hex.length - 2) * 1.2 > MAX_BIGINT_DIGITS) throw tooLong;
  const digits = StringCtor(value);
  if (digits.length - (value < 0n ? 1 : 0) > MAX_BIGINT_DIGITS) throw tooLong;
  return digits;
}

/** A regular expression's flags, each read by its own captured getter (never through the object's properties). */
function flagsOf(regexp: object): string {
  let flags = "";
  for (let i = 0; i < RegExpFlagGetters.length; i++) {
    const [flag, get] = RegExpFlagGetters[i]!;
    if (ReflectApply(get, regexp, []) === true) flags += flag;
  }
  return flags;
}

/** An error's name, message and code as data properties (own or inherited), or undefined when one is a getter or a Proxy. */
function errorFields(
  error: object,
  isProxy: (value: object) => boolean,
): Record<string, unknown> | undefined {
  const fields = { __proto__: null } as unknown as Record<string, unknown>;
  const keys = ["name", "message", "code"];
  for (let k = 0; k < keys.length; k++) {
    const key = keys[k]!;
    for (let at: object | null = error; at !== null; at = ReflectGetPrototypeOf(at) as object | null) {
      if (at !== error && isProxy(at)) return undefined;
      if (!ObjectHasOwn(at, key)) continue;
      if (ReflectApply(ObjectLookupGetter, at, [key]) !== undefined) return undefined;
      const value = (at as Record<string, unknown>)[key];
      // Coercing an object to a string would call its toString: only primitives are read.
      if (typeof value !== "object" && typeof value !== "function" && typeof value !== "symbol")
        fields[key] = value;
      break;
    }
  }
  return fields;
}

/** The path of the visit's current place: `segments` up to `depth` below `rootPath`. */
function pathOf(rootPath: string, segments: unknown[], depth: number): string {
  let path = rootPath;
  for (let i = 0; i < depth; i++) {
    const segment = segments[i];
    if (typeof segment === "number") path = `${path}[${segment}]`;
    else if (typeof segment === "string") path = path === "" ? segment : `${path}.${segment}`;
    else path = `${path}${(segment as string[])[0]}`;
  }
  return path;
}

export function createEncoder(options: WireEncodeOptions) {
  const nodes = nullArray();
  const seen = new MapCtor<unknown, number>();
  // Objects in the order they were registered, so a refused field can be taken back.
  const registered = nullArray() as object[];
  const handleOf = options.handleOf;
  const knownHandle = options.knownHandle;
  const onUnsupported = options.onUnsupported;
  const isProxy = options.isProxy;
  const maxLength = options.maxLength ?? Infinity;
  const rootPath = options.rootPath ?? "value";
  // Where the visit is: numbers are array indices, strings object keys, [text] a literal segment. A path string is
  // only built when something is reported, so large values pay nothing for it.
  const segments = nullArray();
  // How many segments are current (writing an array's length is slow: the table only grows, `depth` says).
  let depth = 0;
  let length = 2;
  // Whether a node was reached again (a shared object or a cycle); a rolled-back field may leave it set, harmlessly.
  let shares = false;

  // The encoded text is a first, cheap bound: with an expanded-size budget its slack is wide enough that text past
  // it always stands for a value past the budget, so it is reported as such.
  const tooLong =
    options.maxExpanded === undefined
      ? `exceeds the limit of ${maxLength} characters once encoded`
      : `is larger than the limit of ${options.maxExpanded} bytes once expanded`;

  function charge(amount: number): void {
    length += amount;
    if (length > maxLength) throw limitError(tooLong);
  }

  function push(node: unknown): number {
    const index = nodes.length;
    nodes[index] = node;
    return index;
  }

  function visitAt(segment: unknown, value: unknown): number {
    segments[depth++] = segment;
    if (depth > MAX_DEPTH) throw limitError(`is nested deeper than ${MAX_DEPTH} levels`);
    const index = visit(value);
    depth--;
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
      case "bigint": {
        const digits = bigintDigits(value);
        charge(digits.length + 8);
        return push(nullArray("B", digits));
      }
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
    if (known !== undefined) {
      shares = true;
      return known;
    }
    const object = value as object;
    if (knownHandle !== undefined) {
      const shape = knownHandle(object);
      if (shape === null) return unsupported(object, "a host object");
      if (shape !== undefined) return registerHandle(object, shape);
    }
    // Any trap of a Proxy (even `Object.prototype.toString` reads Symbol.toStringTag through it) runs its code.
    if (isProxy?.(object)) return unsupported(object, "a Proxy", true);
    if (typeof object === "function") return handleOrUnsupported(object);
    charge(8);
    if (ArrayIsArray(object)) {
      const node = nullArray("A");
      const index = register(object, node);
      const items = object as unknown[];
      const count = items.length;
      for (let i = 0; i < count; i++) {
        let item: number;
        if (isProxy === undefined) item = visitAt(i, items[i]);
        else if (!ObjectHasOwn(items, i)) item = visitAt(i, undefined);
        else if (ReflectApply(ObjectLookupGetter, items, [i]) !== undefined) item = opaqueAt(i);
        else item = visitAt(i, items[i]);
        node[node.length] = item === -1 ? visit(undefined) : item;
      }
      return index;
    }
    // Plain data first: brand checks throw for every other object, which made large values very slow.
    if (isPlainObject(object) && !isErrorLike(object)) return encodePlainObject(object);
    const tag = ReflectApply(ObjectToString, object, []) as string;
    const binary = binaryOf(object, tag);
    if (binary !== undefined) {
      charge(binary[1].length + 16);
      return register(object, nullArray("T", binary[0], toBase64(binary[1])));
    }
    if (tag === "[object Date]" && hasBrand(DateGetTime, object)) {
      const time = ReflectApply(DateGetTime, object, []) as number;
      return register(object, nullArray("D", NumberIsFinite(time) ? time : null));
    }
    if (tag === "[object RegExp]" && hasBrand(RegExpSource, object)) {
      const source = ReflectApply(RegExpSource, object, []) as string;
      const flags =
        isProxy === undefined ? (ReflectApply(RegExpFlags, object, []) as string) : flagsOf(object);
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
      const error = (isProxy === undefined ? object : errorFields(object, isProxy)) as {
        name?: unknown;
        message?: unknown;
        code?: unknown;
      };
      if (error === undefined) return unsupported(object, "an error with a getter", true);
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
      const child =
        isProxy !== undefined && ReflectApply(ObjectLookupGetter, object, [key]) !== undefined
          ? opaqueAt(key)
          : visitAt(key, record[key]);
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
    registered[registered.length] = object;
    return index;
  }

  function handleOrUnsupported(object: object): number {
    const shape = handleOf === undefined ? undefined : handleOf(object, pathOf(rootPath, segments, depth));
    if (shape === undefined) return unsupported(object);
    return registerHandle(object, shape);
  }

  function registerHandle(object: object, shape: HandleShape): number {
    charge(64);
    return register(object, nullArray("H", plainShape(shape)));
  }

  function unsupported(value: unknown, description = describe(value), opaque = false): number {
    const path = pathOf(rootPath, segments, depth);
    if (onUnsupported === undefined) {
      throw new TypeErrorCtor(`${path} is ${description} and cannot be copied`);
    }
    onUnsupported(opaque ? { path, description, opaque } : { path, description });
    return -1;
  }

  /** A getter at `segment`: reported (never called). */
  function opaqueAt(segment: unknown): number {
    segments[depth++] = segment;
    const index = unsupported(undefined, "a getter", true);
    depth--;
    return index;
  }

  return {
    nodes,
    visit,
    visitAt,
    push,
    /** Whether some node is reached from more than one place (a shared object or a cycle). */
    shares: (): boolean => shares,
    /** Where the encoding is, to take back what a refused field added. */
    mark(): number[] {
      return nullArray(nodes.length, registered.length, length) as number[];
    },
    rollback(mark: number[]): void {
      for (let i = mark[1]!; i < registered.length; i++) ReflectApply(MapDelete, seen, [registered[i]]);
      registered.length = mark[1]!;
      nodes.length = mark[0]!;
      length = mark[2]!;
      depth = 0;
    },
  };
}

export function encode(root: unknown, options: WireEncodeOptions = {}): string {
  const primitive = encodePrimitive(root, options.maxLength ?? Infinity, options.maxExpanded ?? Infinity);
  if (primitive !== undefined) return primitive;
  const encoder = createEncoder(options);
  const maxExpanded = options.maxExpanded;
  try {
    if (encoder.visit(root) === -1) encoder.push(nullArray("U"));
    if (maxExpanded !== undefined) createMeasurer(encoder.nodes).measure(0, 0, maxExpanded);
  } catch (error) {
    // A bound names the value it refused: "returns is nested deeper than 1000 levels".
    if (isLimit(error)) throw limitError(`${options.rootPath ?? "value"} ${messageOf(error)}`);
    throw error;
  }
  return JSONStringify(encoder.nodes);
}

export function encodeFields(
  record: object,
  fields: readonly string[],
  options: WireFieldsOptions,
): { text: string; expanded: number; nodes: unknown[]; shares: boolean } {
  const rootPath = options.rootPath ?? "value";
  let unsupportedInField = false;
  let fieldPath = "";
  const onUnsupported = options.onUnsupported;
  const encoder = createEncoder({
    __proto__: null,
    knownHandle: options.knownHandle,
    handleOf: options.handleOf,
    maxLength: options.maxLength,
    maxExpanded: options.maxExpanded,
    isProxy: options.isProxy,
    rootPath,
    onUnsupported: (unsupported: WireUnsupported) => {
      // Reading a Proxy or a getter would run model code while the data are saved: the field is refused whole.
      if (unsupported.opaque === true) {
        throw limitError(
          `holds ${unsupported.description} at ${unsupported.path}, whose code would run while the data are saved`,
        );
      }
      if (onUnsupported === undefined) {
        throw limitError(
          unsupported.path === fieldPath
            ? `is ${unsupported.description}, which has no plain-data form`
            : `holds ${unsupported.description} at ${unsupported.path}, which has no plain-data form`,
        );
      }
      unsupportedInField = true;
      onUnsupported(unsupported);
    },
  } as WireEncodeOptions);
  const measurer = createMeasurer(encoder.nodes);
  const root = nullArray("O");
  encoder.push(root);
  let remaining = options.maxExpanded ?? Infinity;
  let expanded = 2;
  for (let i = 0; i < fields.length; i++) {
    const field = StringCtor(fields[i]);
    let value: unknown;
    try {
      if (options.isProxy !== undefined && ReflectApply(ObjectLookupGetter, record, [field]) !== undefined) {
        options.onRefused(field, "is a getter, whose code would run while the data are saved");
        continue;
      }
      value = (record as Record<string, unknown>)[field];
    } catch (error) {
      options.onRefused(field, `could not be read (${messageOf(error)})`);
      continue;
    }
    const mark = encoder.mark();
    unsupportedInField = false;
    fieldPath = rootPath === "" ? field : `${rootPath}.${field}`;
    try {
      const index = encoder.visitAt(field, value);
      if (index === -1) {
        encoder.rollback(mark);
        measurer.forget(mark[0]!);
        if (!unsupportedInField) options.onRefused(field, "cannot be copied");
        continue;
      }
      const size = measurer.measure(index, 1, remaining - field.length - 4) + field.length + 4;
      remaining -= size;
      expanded += size;
      if (options.onEncoded !== undefined) options.onEncoded(field, size, encoder.mark()[2]! - mark[2]!);
      root[root.length] = field;
      root[root.length] = index;
    } catch (error) {
      encoder.rollback(mark);
      measurer.forget(mark[0]!);
      const message = messageOf(error);
      options.onRefused(field, isLimit(error) ? message : `could not be copied (${message})`);
    }
  }
  return { text: JSONStringify(encoder.nodes), expanded, nodes: encoder.nodes, shares: encoder.shares() };
}

export function describeKey(key: unknown): string {
  return typeof key === "string" ? JSONStringify(key) : StringCtor(typeof key === "symbol" ? "symbol" : key);
}
