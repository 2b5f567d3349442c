import type { HandleShape } from "../protocol.ts";
import type { WireDecodeOptions } from "./codec.ts";
import {
  ArrayIsArray,
  ArrayPrototype,
  BigIntCtor,
  binaryConstructors,
  DateCtor,
  ErrorCtor,
  errorConstructors,
  MapCtor,
  MapSet,
  NumberIsInteger,
  ObjectCreate,
  ObjectPrototype,
  ReflectApply,
  ReflectSetPrototypeOf,
  RegExpCtor,
  SetAdd,
  SetCtor,
  StringCtor,
  TypeErrorCtor,
  Uint8ArrayCtor,
} from "./intrinsics.ts";
import { createMeasurer, parse } from "./measure.ts";
import { decodePrimitive, NOT_PRIMITIVE } from "./primitive-wire.ts";
import {
  base64Length,
  define,
  elementSize,
  fromBase64,
  isDecimal,
  isLimit,
  limitError,
  messageOf,
  nullArray,
  specialNumber,
} from "./values.ts";

export function decode(text: string, options: WireDecodeOptions = {}): unknown {
  const table = parse(text);
  if (options.onRefused === undefined) {
    const primitive = decodePrimitive(table, options.maxExpanded ?? Infinity);
    if (primitive !== NOT_PRIMITIVE) return primitive;
  }
  const values = nullArray();
  const built = new Uint8ArrayCtor(table.length);
  const onHandle = options.onHandle;
  const maxExpanded = options.maxExpanded ?? Infinity;
  const onRefused = options.onRefused;
  const onShared = options.onShared;

  function child(index: unknown): unknown {
    if (typeof index !== "number" || !NumberIsInteger(index) || index < 0 || index >= table.length) {
      throw new TypeErrorCtor(`invalid wire text: bad node index ${StringCtor(index)}`);
    }
    if (built[index] === 1) {
      if (onShared !== undefined) onShared();
      return values[index];
    }
    return build(index);
  }

  function remember(index: number, value: unknown): unknown {
    values[index] = value;
    built[index] = 1;
    return value;
  }

  function build(index: number): unknown {
    const node = table[index];
    if (node === null || typeof node === "string" || typeof node === "number" || typeof node === "boolean") {
      return remember(index, node);
    }
    if (!ArrayIsArray(node) || typeof node[0] !== "string")
      throw new TypeErrorCtor(`invalid wire text: bad node ${index}`);
    const parts = node as unknown[];
    switch (parts[0]) {
      case "U":
        return remember(index, undefined);
      case "N": {
        const value = specialNumber(parts[1]);
        return remember(index, value === undefined ? fail(index) : value);
      }
      case "B":
        if (!isDecimal(parts[1])) fail(index);
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
      case "R": {
        let pattern: RegExp;
        try {
          pattern = new RegExpCtor(StringCtor(parts[1]), StringCtor(parts[2]));
        } catch {
          return fail(index);
        }
        return remember(index, pattern);
      }
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
      case "T": {
        const kind = parts[1];
        const length = base64Length(parts[2]);
        const unit = elementSize(kind);
        if (length < 0 || unit === 0 || length % unit !== 0) return fail(index);
        const buffer = fromBase64(parts[2] as string, length);
        if (kind === "ArrayBuffer") return remember(index, buffer);
        return remember(index, new binaryConstructors[kind as string]!(buffer));
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

  const measurer = createMeasurer(table, onHandle === undefined);
  if (onRefused === undefined) {
    // Without a budget (values the host sent into the isolate) there is nothing to bound.
    if (maxExpanded === Infinity) return child(0);
    try {
      measurer.measure(0, 0, maxExpanded);
    } catch (error) {
      if (isLimit(error)) throw limitError(`value ${messageOf(error)}`);
      throw error;
    }
    return child(0);
  }
  // Field by field: the root is a record and each field is bounded and built on its own.
  const root = table[0];
  if (!ArrayIsArray(root) || root[0] !== "O") throw new TypeErrorCtor("invalid wire text: expected a record");
  const record = ObjectCreate(null) as Record<string, unknown>;
  let remaining = maxExpanded;
  for (let i = 1; i + 1 < root.length; i += 2) {
    const field = root[i];
    if (typeof field !== "string") fail(0);
    try {
      const index = root[i + 1] as number;
      const size = measurer.measure(index, 1, remaining - field.length - 4) + field.length + 4;
      remaining -= size;
      define(record, field, child(index));
      if (options.onDecoded !== undefined) options.onDecoded(field, size);
    } catch (error) {
      if (!isLimit(error)) throw error;
      onRefused(field, messageOf(error));
    }
  }
  ReflectSetPrototypeOf(record, ObjectPrototype);
  return record;
}
