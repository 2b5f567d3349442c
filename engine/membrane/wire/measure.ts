import {
  ArrayIsArray,
  Float64ArrayCtor,
  JSONParse,
  MapCtor,
  MapGet,
  MapSet,
  NumberIsInteger,
  ReflectApply,
  RegExpCtor,
  StringCharCodeAt,
  StringCtor,
  TypeErrorCtor,
  Uint8ArrayCtor,
  Uint16ArrayCtor,
} from "./intrinsics.ts";
import {
  base64Length,
  elementSize,
  isBase64,
  isDecimal,
  isLimit,
  limitError,
  MAX_BIGINT_DIGITS,
  MAX_DEPTH,
  messageOf,
  nullArray,
  specialNumber,
} from "./values.ts";

/** The largest distance of a valid Date's time from the epoch, in milliseconds (ECMAScript's time range). */
const MAX_DATE_TIME_MS = 8.64e15;

// ---- expanded size ------------------------------------------------------------------------------------------
/**
 * Sizes nodes of a wire table as if every shared node were copied at each use (what a host that formats or
 * persists the value walks): a back edge (a cycle) counts as a reference, and the size of every node whose
 * subtree has no back edge above it is memoised, so each such node is sized once. A node inside a cycle is sized
 * again at each use (its expansion depends on the path), which stays bounded: every node sized adds at least 4 to
 * a total that stops at the budget. `measure` throws a `WireLimitError` at the first node past the budget or past
 * MAX_DEPTH, and a TypeError for a malformed node; nodes that were being sized when it threw are refused for good.
 * Every node it sizes is checked as the decoder will build it (the one place of these rules: special numbers,
 * bigint digits, Dates, RegExps, binary data; with `refuseHandles`, any handle), so text it measured decodes.
 */
export function createMeasurer(table: unknown[], refuseHandles = false) {
  // Per node, grown with the table (the encoder's table grows while it is measured field by field).
  let capacity = 0;
  let state = new Uint8ArrayCtor(0); // 0: new · 1: being sized · 2: sized · 3: refused
  let sizes = new Float64ArrayCtor(0);
  let heights = new Uint16ArrayCtor(0);
  let positions = new Uint16ArrayCtor(0);
  const refusals = new MapCtor<number, Error>();
  const stack = nullArray() as number[];
  // How many entries of `stack` are current (writing an array's length is slow: the stack only grows, `top` says).
  let top = 0;

  function grow(): void {
    if (table.length <= capacity) return;
    // Exactly the table at first (a parsed table never grows); doubled when the encoder's table has grown.
    capacity = capacity === 0 ? table.length : table.length * 2;
    const grownState = new Uint8ArrayCtor(capacity);
    const grownSizes = new Float64ArrayCtor(capacity);
    const grownHeights = new Uint16ArrayCtor(capacity);
    const grownPositions = new Uint16ArrayCtor(capacity);
    for (let i = 0; i < state.length; i++) {
      grownState[i] = state[i]!;
      grownSizes[i] = sizes[i]!;
      grownHeights[i] = heights[i]!;
      grownPositions[i] = positions[i]!;
    }
    state = grownState;
    sizes = grownSizes;
    heights = grownHeights;
    positions = grownPositions;
  }
  let budget = 0;
  // The lowest stack position a back edge in the last sized subtree reached (Infinity: none, the size is final).
  let reached = Infinity;

  function tooLarge(): Error {
    return limitError(`is larger than the limit of ${budget} bytes once expanded`);
  }

  function tooDeep(): Error {
    return limitError(`is nested deeper than ${MAX_DEPTH} levels`);
  }

  function bad(index: number): Error {
    return new TypeErrorCtor(`invalid wire text: bad node ${index}`);
  }

  function text(value: unknown, index: number): number {
    if (typeof value !== "string") throw bad(index);
    return value.length;
  }

  // Height of the node last sized (levels below it).
  let lastHeight = 0;
  // For the node being sized: the lowest stack position its children reached, and its height so far.
  let low = Infinity;
  let height = 0;

  // Sizes a child and folds what it reached and its height into the node being sized.
  function sizeChild(child: unknown, depth: number): number {
    // A string, number, boolean or null: sized here, without the bookkeeping of a node with children (most nodes).
    if (typeof child === "number" && child >= 0 && child < table.length && NumberIsInteger(child)) {
      const node = table[child];
      const leaf =
        typeof node === "string"
          ? node.length + 2
          : typeof node === "number"
            ? 12
            : typeof node === "boolean"
              ? 5
              : node === null
                ? 4
                : -1;
      if (leaf !== -1) {
        if (depth > MAX_DEPTH) throw tooDeep();
        if (leaf > budget) throw tooLarge();
        if (height < 1) height = 1;
        return leaf;
      }
    }
    const result = size(child, depth);
    if (reached < low) low = reached;
    if (lastHeight + 1 > height) height = lastHeight + 1;
    return result;
  }

  function size(index: unknown, depth: number): number {
    if (typeof index !== "number" || !NumberIsInteger(index) || index < 0 || index >= table.length) {
      throw new TypeErrorCtor(`invalid wire text: bad node index ${StringCtor(index)}`);
    }
    const known = state[index];
    reached = Infinity;
    lastHeight = 0;
    if (known === 2) {
      lastHeight = heights[index]!;
      if (depth + heights[index]! > MAX_DEPTH) throw tooDeep();
      if (sizes[index]! > budget) throw tooLarge();
      return sizes[index]!;
    }
    if (known === 1) {
      reached = positions[index]!;
      return 8;
    }
    if (known === 3) throw ReflectApply(MapGet, refusals, [index]) as Error;
    if (depth > MAX_DEPTH) throw tooDeep();
    const node = table[index];
    let total: number;
    if (node === null || typeof node !== "object") {
      if (node === null) total = 4;
      else if (typeof node === "string") total = node.length + 2;
      else if (typeof node === "number") total = 12;
      else if (typeof node === "boolean") total = 5;
      else throw bad(index);
      if (total > budget) throw tooLarge();
      heights[index] = 0;
    } else {
      if (!ArrayIsArray(node) || typeof node[0] !== "string") throw bad(index);
      const parts = node as unknown[];
      const count = parts.length;
      state[index] = 1;
      const position = top++;
      positions[index] = position;
      stack[position] = index;
      const outerLow = low;
      const outerHeight = height;
      low = Infinity;
      height = 0;
      total = 2;
      switch (parts[0]) {
        case "U":
          total = 9;
          break;
        case "N":
          if (specialNumber(parts[1]) === undefined) throw bad(index);
          total = 12;
          break;
        case "B": {
          if (!isDecimal(parts[1])) throw bad(index);
          const digits = text(parts[1], index);
          const sign = digits > 0 && ReflectApply(StringCharCodeAt, parts[1], [0]) === 45 ? 1 : 0;
          if (digits - sign > MAX_BIGINT_DIGITS) {
            throw limitError(`holds a bigint of more than ${MAX_BIGINT_DIGITS} digits`);
          }
          total = digits + 1;
          break;
        }
        case "D":
          // The encoder writes a Date's time or null (an invalid Date); anything else is no Date it wrote.
          if (count !== 2 || !(parts[1] === null || isDateTime(parts[1]))) throw bad(index);
          total = 26;
          break;
        case "R":
          total = text(parts[1], index) + text(parts[2], index) + 4;
          try {
            new RegExpCtor(parts[1] as string, parts[2] as string);
          } catch {
            throw bad(index);
          }
          break;
        case "E":
          total = text(parts[1], index) + text(parts[2], index) + 24;
          break;
        case "H":
          if (refuseHandles) throw new TypeErrorCtor("invalid wire text: a handle where none is accepted");
          total = 16;
          break;
        case "T": {
          const bytes = base64Length(parts[2]);
          const unit = elementSize(parts[1]);
          if (bytes < 0 || unit === 0 || bytes % unit !== 0 || !isBase64(parts[2] as string, bytes)) {
            throw bad(index);
          }
          total = bytes + 16;
          break;
        }
        case "A":
        case "S":
          for (let i = 1; i < count; i++) {
            total += 1 + sizeChild(parts[i], depth + 1);
            if (total > budget) throw tooLarge();
          }
          break;
        case "O":
          for (let i = 1; i + 1 < count; i += 2) {
            total += text(parts[i], index) + 4 + sizeChild(parts[i + 1], depth + 1);
            if (total > budget) throw tooLarge();
          }
          break;
        case "M":
          for (let i = 1; i + 1 < count; i += 2) {
            total += 2 + sizeChild(parts[i], depth + 1) + sizeChild(parts[i + 1], depth + 1);
            if (total > budget) throw tooLarge();
          }
          break;
        default:
          throw bad(index);
      }
      if (total > budget) throw tooLarge();
      top--;
      const nodeLow = low;
      const nodeHeight = height;
      low = outerLow;
      height = outerHeight;
      lastHeight = nodeHeight;
      if (nodeLow < position) {
        // Part of a cycle through a node above it: its size holds for this path only.
        state[index] = 0;
        reached = nodeLow;
        return total;
      }
      heights[index] = nodeHeight;
    }
    state[index] = 2;
    sizes[index] = total;
    reached = Infinity;
    return total;
  }

  return {
    /** Expanded size of node `index` reached at `depth`, within `limit`. */
    measure(index: number, depth: number, limit: number): number {
      budget = limit;
      grow();
      try {
        return size(index, depth);
      } catch (error) {
        for (let i = 0; i < top; i++) {
          state[stack[i]!] = 3;
          ReflectApply(MapSet, refusals, [stack[i], error]);
        }
        top = 0;
        low = Infinity;
        height = 0;
        throw error;
      }
    },
    /** Forgets nodes from `start` on (the encoder took them back). */
    forget(start: number): void {
      for (let i = start; i < capacity; i++) state[i] = 0;
    },
  };
}

// ---- decode -------------------------------------------------------------------------------------------------
export function parse(text: string): unknown[] {
  let nodes: unknown;
  try {
    nodes = JSONParse(text);
  } catch (error) {
    throw new TypeErrorCtor(`invalid wire text: ${(error as Error).message}`);
  }
  if (!ArrayIsArray(nodes) || nodes.length === 0)
    throw new TypeErrorCtor("invalid wire text: expected a non-empty array");
  return nodes as unknown[];
}

export function measure(text: string, maxExpanded = Infinity): number {
  const table = parse(text);
  try {
    return createMeasurer(table).measure(0, 0, maxExpanded);
  } catch (error) {
    if (isLimit(error)) throw limitError(`value ${messageOf(error)}`);
    throw error;
  }
}

/** Whether a wire Date's number is a time a Date holds: whole milliseconds within ±8.64e15. */
function isDateTime(time: unknown): boolean {
  return (
    typeof time === "number" && NumberIsInteger(time) && time >= -MAX_DATE_TIME_MS && time <= MAX_DATE_TIME_MS
  );
}
