import {
  ArrayIsArray,
  ArrayPrototype,
  JSONStringify,
  NumberIsFinite,
  ObjectIs,
  ReflectSetPrototypeOf,
} from "./intrinsics.ts";
import { nullArray } from "./values.ts";

/*
 * The primitive fast path (issue 17): a host call's arguments and results are mostly a few strings, numbers,
 * booleans or nulls. Their wire text is the same as the general codec writes (`[v]`, or `[["A",1,…,n],v1,…,vn]`), and
 * the same limits hold (the encoder's length charges, the measurer's expanded sizes, computed the same way); it only
 * skips building an encoder, a measurer and the node bookkeeping. Anything else (undefined, -0, NaN, ±Infinity,
 * bigints, objects, more items than MAX_ITEMS, a value near a limit) goes the general way, which also words the
 * errors.
 */

/** A flat array longer than this goes the general way. */
const MAX_ITEMS = 16;

/** A value that stands for itself in JSON exactly. */
function jsonExact(value: unknown): boolean {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return NumberIsFinite(value) && !ObjectIs(value, -0);
    case "object":
      return value === null;
    default:
      return false;
  }
}

/** What the encoder charges against `maxLength` for a JSON-exact value (see encode.ts `visit`). */
function charged(value: unknown): number {
  if (typeof value === "string") return value.length + 3;
  if (typeof value === "boolean") return 6;
  if (typeof value === "number") return 24;
  return 5;
}

/** The expanded size the measurer gives a JSON-exact node (see measure.ts `size`). */
function expandedSize(value: unknown): number {
  if (typeof value === "string") return value.length + 2;
  if (typeof value === "boolean") return 5;
  if (typeof value === "number") return 12;
  return 4;
}

/** Wire text of a JSON-exact primitive or a short flat array of them within the limits; undefined: not one. */
export function encodePrimitive(root: unknown, maxLength: number, maxExpanded: number): string | undefined {
  if (jsonExact(root)) {
    if (2 + charged(root) > maxLength || expandedSize(root) > maxExpanded) return undefined;
    return JSONStringify(nullArray(root));
  }
  if (!ArrayIsArray(root)) return undefined;
  const items = root as unknown[];
  const count = items.length;
  if (count > MAX_ITEMS) return undefined;
  const node = nullArray("A");
  const nodes = nullArray(node);
  let length = 10;
  let expanded = 2;
  for (let i = 0; i < count; i++) {
    const item = items[i];
    if (!jsonExact(item)) return undefined;
    length += charged(item);
    expanded += 1 + expandedSize(item);
    node[i + 1] = i + 1;
    nodes[i + 1] = item;
  }
  if (length > maxLength || expanded > maxExpanded) return undefined;
  return JSONStringify(nodes);
}

/** Marks wire text that is not a JSON-exact primitive or a flat array of them. */
export const NOT_PRIMITIVE: unique symbol = Symbol("not primitive");

/** The value of a parsed wire table holding a JSON-exact primitive or a flat array of them within `maxExpanded`. */
export function decodePrimitive(table: unknown[], maxExpanded: number): unknown {
  const root = table[0];
  if (table.length === 1) {
    if (ArrayIsArray(root) && root.length === 1 && root[0] === "A") {
      // The empty array (a call without arguments): what the general way builds, expanded size 2.
      if (2 > maxExpanded) return NOT_PRIMITIVE;
      const empty = nullArray();
      ReflectSetPrototypeOf(empty, ArrayPrototype);
      return empty;
    }
    if (root !== null && typeof root === "object") return NOT_PRIMITIVE;
    if (!jsonExact(root) || expandedSize(root) > maxExpanded) return NOT_PRIMITIVE;
    return root;
  }
  if (!ArrayIsArray(root) || root[0] !== "A" || root.length !== table.length || table.length > MAX_ITEMS + 1)
    return NOT_PRIMITIVE;
  const array = nullArray();
  let expanded = 2;
  for (let i = 1; i < table.length; i++) {
    const item = table[i];
    if (root[i] !== i || !jsonExact(item)) return NOT_PRIMITIVE;
    expanded += 1 + expandedSize(item);
    array[i - 1] = item;
  }
  if (expanded > maxExpanded) return NOT_PRIMITIVE;
  ReflectSetPrototypeOf(array, ArrayPrototype);
  return array;
}
