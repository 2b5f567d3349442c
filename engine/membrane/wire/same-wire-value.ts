import {
  ArrayIsArray,
  MapCtor,
  MapGet,
  MapSet,
  NumberIsFinite,
  ObjectHasOwn,
  ObjectIs,
  ObjectKeys,
  ObjectLookupGetter,
  ReflectApply,
  SetAdd,
  SetCtor,
  SetSize,
  StringCtor,
} from "./intrinsics.ts";
import { isErrorLike, isPlainObject, MAX_DEPTH } from "./values.ts";

/**
 * Whether `current` would encode to the same wire as node `index` of `table`, the node table an encoder built for
 * the last snapshot (the isolate keeps it privately: nothing else can reach it, and no value is decoded from it).
 * Only plain data is compared (strings, booleans, numbers by `Object.is` so -0 and NaN stay exact, bigints, null,
 * undefined, arrays, plain objects with the same own enumerable keys in the same order, shared and circular
 * references in the same places); anything else (a Date, a Map, a function, a host object, an Error, a value deeper
 * than the bounds) answers false, so the caller encodes the value as usual. A false "same" would lose data; a false
 * "different" only costs an encode. `tableShares` says whether the table reaches a node from more than one place (or
 * a cycle); without that, any object met twice in `current` is a difference, and the walk needs no map of pairs
 * (most data: several times faster).
 */
export function sameWireValue(
  current: unknown,
  table: readonly unknown[],
  index: number,
  isHostObject: (value: object) => boolean,
  tableShares: boolean,
  isProxy?: (value: object) => boolean,
): boolean {
  // Guarded (`isProxy` given): no code of the value runs. A Proxy or a getter answers false (the encoder refuses it),
  // and a hole is undefined without a look at the array's prototypes.
  const hasGetter = (object: object, key: string | number): boolean =>
    isProxy !== undefined && ReflectApply(ObjectLookupGetter, object, [key]) !== undefined;
  // One object of the value stands for one node of the table, both ways: the same sharing, the same cycles.
  const pairs = new MapCtor<object, number>();
  const reverse = new MapCtor<number, object>();
  const visited = new SetCtor<object>();

  // The node the encoder writes for a primitive is the primitive itself when JSON holds it exactly (encode.ts `visit`).
  function samePrimitive(value: unknown, node: unknown): boolean {
    switch (typeof value) {
      case "string":
      case "boolean":
        return node === value;
      case "number":
        if (NumberIsFinite(value) && !ObjectIs(value, -0)) return node === value;
        return (
          tagged(node, "N", 2) && (node as unknown[])[1] === (ObjectIs(value, -0) ? "-0" : StringCtor(value))
        );
      case "bigint":
        return tagged(node, "B", 2) && (node as unknown[])[1] === StringCtor(value);
      case "undefined":
        return tagged(node, "U", 1);
      default:
        // null; a symbol or a function never encodes as itself.
        return value === null && node === null;
    }
  }

  function same(value: unknown, at: unknown, depth: number): boolean {
    if (typeof at !== "number") return false;
    const node = table[at];
    if (typeof value !== "object" || value === null) return samePrimitive(value, node);
    if (!ArrayIsArray(node) || depth > MAX_DEPTH) return false;
    if (tableShares) {
      const paired = ReflectApply(MapGet, pairs, [value]) as number | undefined;
      if (paired !== undefined) return paired === at;
      if (ReflectApply(MapGet, reverse, [at]) !== undefined) return false;
      ReflectApply(MapSet, pairs, [value, at]);
      ReflectApply(MapSet, reverse, [at, value]);
    } else {
      const before = ReflectApply(SetSize, visited, []) as number;
      ReflectApply(SetAdd, visited, [value]);
      if (ReflectApply(SetSize, visited, []) === before) return false;
    }
    if (isHostObject(value)) return false;
    if (isProxy?.(value)) return false;
    const children = node as unknown[];
    if (ArrayIsArray(value)) {
      if (children[0] !== "A") return false;
      const items = value as unknown[];
      const count = items.length;
      if (count + 1 !== children.length) return false;
      for (let i = 0; i < count; i++) {
        if (isProxy !== undefined && !ObjectHasOwn(items, i)) {
          if (!same(undefined, children[i + 1], depth + 1)) return false;
          continue;
        }
        if (hasGetter(items, i) || !same(items[i], children[i + 1], depth + 1)) return false;
      }
      return true;
    }
    if (children[0] !== "O" || !isPlainObject(value) || isErrorLike(value)) return false;
    const keys = ObjectKeys(value);
    if (keys.length * 2 + 1 !== children.length) return false;
    const record = value as Record<string, unknown>;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      if (key !== children[2 * i + 1] || hasGetter(value, key)) return false;
      if (!same(record[key], children[2 * i + 2], depth + 1)) return false;
    }
    return true;
  }

  try {
    if (typeof current === "object" && current !== null && isProxy?.(current)) return false;
    return same(current, index, 1);
  } catch {
    // A getter or a proxy trap of model code threw: the encoder reports it.
    return false;
  }
}

function tagged(node: unknown, tag: string, length: number): boolean {
  return ArrayIsArray(node) && node.length === length && node[0] === tag;
}
