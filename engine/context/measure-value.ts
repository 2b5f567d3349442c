import { types } from "node:util";
import { MossError } from "../errors.ts";
import { WIRE_MAX_BIGINT_DIGITS, WIRE_MAX_DEPTH } from "../membrane/index.ts";

/*
 * The expanded size of a host value, counted like the wire codec's `measure`: every use of a shared object counts
 * in full (what superjson writes and what a formatter walks), a back edge of a cycle counts as a reference, binary
 * data counts its bytes, a bigint its digits. Objects whose subtree closes no cycle above them are sized once
 * (memoised); the walk stops at the first object past the budget, so it costs at most linear time in the budget.
 */

const BINARY_TAGS = new Set(["[object ArrayBuffer]", "[object SharedArrayBuffer]", "[object DataView]"]);

/** Why a value is over a bound ("is larger than …", "is nested deeper than …"), or undefined when it fits. */
export function expandedSizeProblem(value: unknown, maxBytes: number): string | undefined {
  try {
    measure(value, maxBytes);
    return undefined;
  } catch (error) {
    if (error instanceof BoundExceeded) return error.message;
    throw error;
  }
}

class BoundExceeded extends Error {}

/**
 * The expanded size of `value`; throws MossError `wire-limit` past `maxBytes`, past the wire's depth bound or for
 * an oversized bigint.
 */
export function measureValue(value: unknown, maxBytes: number): number {
  try {
    return measure(value, maxBytes);
  } catch (error) {
    if (error instanceof BoundExceeded) throw new MossError("wire-limit", `value ${error.message}`, {});
    throw error;
  }
}

function measure(value: unknown, maxBytes: number): number {
  const sizes = new Map<object, number>();
  const heights = new Map<object, number>();
  const positions = new Map<object, number>();
  let depthOfStack = 0;
  let reached = Number.POSITIVE_INFINITY;
  let lastHeight = 0;

  const tooLarge = () => new BoundExceeded(`is larger than the limit of ${maxBytes} bytes once expanded`);

  function size(item: unknown, depth: number): number {
    reached = Number.POSITIVE_INFINITY;
    lastHeight = 0;
    switch (typeof item) {
      case "string":
        return item.length + 2;
      case "number":
        return 12;
      case "boolean":
        return 5;
      case "undefined":
        return 9;
      case "bigint":
        return bigintSize(item);
      case "symbol":
      case "function":
        return 8;
    }
    if (item === null) return 4;
    const object = item as object;
    const known = sizes.get(object);
    if (known !== undefined) {
      lastHeight = heights.get(object)!;
      if (depth + lastHeight > WIRE_MAX_DEPTH) throw tooDeep();
      return known;
    }
    const position = positions.get(object);
    if (position !== undefined) {
      reached = position;
      return 8;
    }
    if (depth > WIRE_MAX_DEPTH) throw tooDeep();
    const here = depthOfStack++;
    positions.set(object, here);
    let total = 2;
    let low = Number.POSITIVE_INFINITY;
    let height = 0;
    // Folds the child just sized into this object's total, lowest back edge and height.
    const fold = (childSize: number, extra: number) => {
      total += extra + childSize;
      if (reached < low) low = reached;
      if (lastHeight + 1 > height) height = lastHeight + 1;
      if (total > maxBytes) throw tooLarge();
    };
    const prototype = types.isProxy(object) ? undefined : Object.getPrototypeOf(object);
    if (prototype === undefined) {
      // A proxy is never inspected here (its traps are host code, and it is refused as data anyway).
      total = 16;
    } else if (Array.isArray(object)) {
      for (let index = 0; index < object.length; index++) fold(size(object[index], depth + 1), 1);
    } else if (prototype === Object.prototype || prototype === null) {
      const record = object as Record<string, unknown>;
      for (const key in record) {
        if (Object.hasOwn(record, key)) fold(size(record[key], depth + 1), key.length + 4);
      }
    } else if (ArrayBuffer.isView(object)) {
      total = object.byteLength + 16;
    } else if (BINARY_TAGS.has(Object.prototype.toString.call(object))) {
      total = (object as ArrayBuffer).byteLength + 16;
    } else if (object instanceof Map) {
      for (const [key, entry] of object) {
        fold(size(key, depth + 1), 2);
        fold(size(entry, depth + 1), 0);
      }
    } else if (object instanceof Set) {
      for (const entry of object) fold(size(entry, depth + 1), 1);
    } else if (object instanceof Date) {
      total = 26;
    } else if (object instanceof RegExp) {
      total = object.source.length + object.flags.length + 4;
    } else if (object instanceof URL) {
      total = object.href.length + 2;
    } else if (object instanceof Error) {
      total = String(object.name).length + String(object.message).length + 24;
    } else total = 16;
    depthOfStack--;
    positions.delete(object);
    if (total > maxBytes) throw tooLarge();
    lastHeight = height;
    if (low < here) {
      reached = low;
      return total;
    }
    reached = Number.POSITIVE_INFINITY;
    sizes.set(object, total);
    heights.set(object, height);
    return total;
  }

  return size(value, 0);
}

function tooDeep(): BoundExceeded {
  return new BoundExceeded(`is nested deeper than ${WIRE_MAX_DEPTH} levels`);
}

/** Digits of a bigint, refusing one over the bound before its (quadratic) decimal conversion. */
function bigintSize(value: bigint): number {
  const hexadecimal = value.toString(16);
  const tooLong = new BoundExceeded(`holds a bigint of more than ${WIRE_MAX_BIGINT_DIGITS} digits`);
  if ((hexadecimal.length - 2) * 1.2 > WIRE_MAX_BIGINT_DIGITS) throw tooLong;
  const text = value.toString();
  if (text.length - (value < 0n ? 1 : 0) > WIRE_MAX_BIGINT_DIGITS) throw tooLong;
  return text.length + 1;
}
