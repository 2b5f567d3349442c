import {
  ArrayIsArray,
  MapCtor,
  MapGet,
  MapSet,
  ObjectIs,
  ObjectKeys,
  ReflectApply,
  SetAdd,
  SetCtor,
  SetSize,
} from "./intrinsics.ts";
import { isErrorLike, isPlainObject, MAX_DEPTH } from "./values.ts";

/**
 * Whether `current` would encode to the same wire as `saved`, a value decoded from wire text that nothing else can
 * reach (the isolate's private copy of a data field's last snapshot): only plain data is compared (strings,
 * booleans, numbers by `Object.is` so -0 and NaN stay exact, bigints, null, undefined, arrays, plain objects with
 * the same own enumerable keys in the same order, shared and circular references in the same places); anything
 * else (a Date, a Map, a function, a host object, an Error, a value deeper than the bounds) answers false, so the
 * caller encodes the value as usual. A false "same" would lose data; a false "different" only costs an encode.
 * `savedShares` says whether the copy holds an object at more than one place (or a cycle); without that, any
 * object met twice in `current` is a difference, and the walk needs no map of pairs (most data: several times faster).
 */
export function sameWireValue(
  current: unknown,
  saved: unknown,
  isHostObject: (value: object) => boolean,
  savedShares: boolean,
): boolean {
  // One object of the value stands for one object of the copy, both ways: the same sharing, the same cycles.
  const pairs = new MapCtor<object, object>();
  const reverse = new MapCtor<object, object>();
  const visited = new SetCtor<object>();

  function same(value: unknown, copy: unknown, depth: number): boolean {
    if (typeof value !== "object" || value === null) {
      return typeof value !== "function" && ObjectIs(value, copy);
    }
    if (typeof copy !== "object" || copy === null || depth > MAX_DEPTH) return false;
    if (savedShares) {
      const paired = ReflectApply(MapGet, pairs, [value]) as object | undefined;
      if (paired !== undefined) return paired === copy;
      if (ReflectApply(MapGet, reverse, [copy]) !== undefined) return false;
      ReflectApply(MapSet, pairs, [value, copy]);
      ReflectApply(MapSet, reverse, [copy, value]);
    } else {
      const before = ReflectApply(SetSize, visited, []) as number;
      ReflectApply(SetAdd, visited, [value]);
      if (ReflectApply(SetSize, visited, []) === before) return false;
    }
    if (isHostObject(value)) return false;
    if (ArrayIsArray(value)) {
      if (!ArrayIsArray(copy)) return false;
      const items = value as unknown[];
      const copies = copy as unknown[];
      const count = items.length;
      if (count !== copies.length) return false;
      for (let i = 0; i < count; i++) if (!same(items[i], copies[i], depth + 1)) return false;
      return true;
    }
    if (ArrayIsArray(copy) || !isPlainObject(value) || isErrorLike(value)) return false;
    if (!isPlainObject(copy) || isErrorLike(copy)) return false;
    const keys = ObjectKeys(value);
    const copyKeys = ObjectKeys(copy);
    if (keys.length !== copyKeys.length) return false;
    const record = value as Record<string, unknown>;
    const copied = copy as Record<string, unknown>;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      if (key !== copyKeys[i] || !same(record[key], copied[key], depth + 1)) return false;
    }
    return true;
  }

  try {
    return same(current, saved, 1);
  } catch {
    // A getter or a proxy trap of model code threw: the encoder reports it.
    return false;
  }
}
