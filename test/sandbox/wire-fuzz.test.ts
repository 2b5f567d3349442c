import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { measureValue } from "../../engine/context/measure-value.ts";
import { MossError } from "../../engine/errors.ts";
import {
  decodeWire,
  encodeWire,
  measureWire,
  WIRE_MAX_BIGINT_DIGITS,
  WIRE_MAX_DEPTH,
} from "../../engine/membrane/host/host-wire.ts";

/*
 * Property-based tests of the wire codec: random and hostile values either round-trip or are refused with a
 * MossError, never throw anything else, never hang (bounded run counts and sizes) and never decode past a limit.
 */

const RUNS = { numRuns: 200, interruptAfterTimeLimit: 30_000 } as const;
const LIMIT = 64 * 1024;

/** Runs `action`; a MossError is a refusal (returned), anything else thrown fails the property. */
function refusedOr<T>(action: () => T): { value?: T; refusal?: MossError } {
  try {
    return { value: action() };
  } catch (error) {
    if (!MossError.is(error)) throw error;
    expect(["wire-invalid", "wire-limit"]).toContain(error.code);
    return { refusal: error };
  }
}

const oddKey = fc.oneof(
  fc.constantFrom(
    "__proto__",
    "constructor",
    "prototype",
    "toString",
    "valueOf",
    "",
    " ",
    "a.b",
    "0",
    "-1",
    "𝒳",
  ),
  fc.string({ maxLength: 8 }),
);

const binary = fc.oneof(
  fc.uint8Array({ maxLength: 64 }),
  fc.int16Array({ maxLength: 16 }),
  fc.uint32Array({ maxLength: 16 }),
  fc.float64Array({ maxLength: 8 }),
  fc.bigInt64Array({ maxLength: 4 }),
  fc.uint8Array({ maxLength: 32 }).map((bytes) => bytes.buffer),
  fc
    .uint8Array({ minLength: 2, maxLength: 32 })
    .map((bytes) => new DataView(bytes.buffer, 1, bytes.length - 1)),
  fc.uint8Array({ maxLength: 32 }).map((bytes) => Buffer.from(bytes)),
);

const leaf = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.double(),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }),
  fc.date({ noInvalidDate: false }),
  fc.constantFrom(-0, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
  fc.constantFrom(/a+b/gi, /[\]]/u, /(?:)/),
  binary,
);

const { value: anyValue } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.array(tie("value"), { maxLength: 5 }),
    fc.sparseArray(tie("value"), { maxLength: 8 }),
    fc.dictionary(oddKey, tie("value"), { maxKeys: 5, noNullPrototype: false }),
    fc.array(fc.tuple(tie("value"), tie("value")), { maxLength: 4 }).map((entries) => new Map(entries)),
    fc.array(tie("value"), { maxLength: 4 }).map((items) => new Set(items)),
  ),
}));

/** A random graph of objects with shared and cyclic references: node specs, then edges between them. */
const graph = fc
  .record({
    kinds: fc.array(fc.constantFrom("array", "object", "map", "set"), { minLength: 1, maxLength: 12 }),
    edges: fc.array(fc.tuple(fc.nat(), fc.nat(), oddKey), { maxLength: 40 }),
  })
  .map(({ kinds, edges }) => {
    const nodes = kinds.map((kind) =>
      kind === "array" ? [] : kind === "map" ? new Map() : kind === "set" ? new Set() : {},
    );
    for (const [from, to, key] of edges) {
      const source = nodes[from % nodes.length]!;
      const target = nodes[to % nodes.length]!;
      if (Array.isArray(source)) source.push(target);
      else if (source instanceof Map) source.set(key, target);
      else if (source instanceof Set) source.add(target);
      else
        Object.defineProperty(source, key, {
          value: target,
          enumerable: true,
          writable: true,
          configurable: true,
        });
    }
    return nodes[0];
  });

describe("wire codec fuzz", () => {
  test("random values round-trip (the decoded value re-encodes to the same text) or are refused", () => {
    fc.assert(
      fc.property(anyValue, (value) => {
        const encoded = refusedOr(() => encodeWire(value));
        if (encoded.value === undefined) return;
        const decoded = refusedOr(() => decodeWire(encoded.value!));
        expect(decoded.refusal).toBeUndefined();
        expect(encodeWire(decoded.value)).toBe(encoded.value);
        expect(decoded.value).toEqual(normalized(value));
      }),
      RUNS,
    );
  });

  test("shared and cyclic graphs keep their identities and are measured consistently on both sides", () => {
    fc.assert(
      fc.property(graph, (value) => {
        const text = encodeWire(value);
        const measured = refusedOr(() => measureWire(text, LIMIT));
        const decoded = refusedOr(() => decodeWire(text, { maxExpandedBytes: LIMIT }));
        expect(decoded.refusal?.code).toBe(measured.refusal?.code);
        if (decoded.value === undefined) return;
        expect(encodeWire(decoded.value)).toBe(text);
        expect(measureValue(decoded.value, LIMIT)).toBe(measured.value);
      }),
      RUNS,
    );
  });

  test("exponential shared structures are refused before anything is built, in time linear in the wire", () => {
    const wraps = fc.constantFrom<Array<(v: unknown) => unknown>>(
      [(v) => [v, v]],
      [(v) => ({ a: v, b: v })],
      [
        (v) =>
          new Map([
            [1, v],
            [2, v],
          ]),
      ],
      [(v) => new Set([v, { v }])],
      [(v) => [v, v, v], (v) => ({ v, w: [v] })],
    );
    fc.assert(
      fc.property(
        wraps,
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        (steps, levels, limit) => {
          let value: unknown = [1];
          for (let i = 0; i < levels; i++) value = steps[i % steps.length]!(value);
          const text = encodeWire(value);
          const decoded = refusedOr(() => decodeWire(text, { maxExpandedBytes: limit }));
          if (decoded.refusal) {
            expect(decoded.refusal.code).toBe("wire-limit");
            return;
          }
          // What was accepted fits once expanded, measured independently on the host value.
          expect(measureValue(decoded.value, limit)).toBeLessThanOrEqual(limit);
        },
      ),
      RUNS,
    );
  });

  test("nesting is bounded at WIRE_MAX_DEPTH levels on both ends", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3 * WIRE_MAX_DEPTH }), fc.boolean(), (depth, useObjects) => {
        let value: unknown = "leaf";
        for (let i = 0; i < depth; i++) value = useObjects ? { value } : [value];
        const encoded = refusedOr(() => encodeWire(value));
        if (depth > WIRE_MAX_DEPTH) expect(encoded.refusal?.code).toBe("wire-limit");
        else expect(decodeWire(encoded.value!)).toEqual(value);
        // A hostile text as deep as it likes is refused by the decoder too.
        const deepText = JSON.stringify(
          Array.from({ length: depth + 1 }, (_, i) => (i === depth ? 0 : ["A", i + 1])),
        );
        const decoded = refusedOr(() => decodeWire(deepText));
        expect(decoded.refusal === undefined).toBe(depth <= WIRE_MAX_DEPTH);
      }),
      { numRuns: 60 },
    );
  });

  test("bigints are capped at WIRE_MAX_BIGINT_DIGITS digits", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3 * WIRE_MAX_BIGINT_DIGITS }),
        fc.boolean(),
        (digits, negative) => {
          const value = (negative ? -1n : 1n) * 10n ** BigInt(digits - 1);
          const encoded = refusedOr(() => encodeWire({ value }));
          if (digits > WIRE_MAX_BIGINT_DIGITS) expect(encoded.refusal?.code).toBe("wire-limit");
          else expect((decodeWire(encoded.value!) as { value: bigint }).value).toBe(value);
          const hostile = JSON.stringify([["B", `${negative ? "-" : ""}${"9".repeat(digits)}`]]);
          expect(refusedOr(() => decodeWire(hostile)).refusal === undefined).toBe(
            digits <= WIRE_MAX_BIGINT_DIGITS,
          );
        },
      ),
      { numRuns: 60 },
    );
  });

  test("huge strings count against the budget", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 200_000 }), (length) => {
        const text = encodeWire(["x".repeat(length)]);
        const decoded = refusedOr(() => decodeWire(text, { maxExpandedBytes: LIMIT }));
        expect(decoded.refusal === undefined).toBe(length + 5 <= LIMIT);
      }),
      { numRuns: 40 },
    );
  });

  test("garbled wire text is decoded or refused with a MossError, never anything else", () => {
    const tag = fc.constantFrom("U", "N", "B", "A", "O", "D", "R", "M", "S", "E", "H", "T", "Q", "");
    const part = fc.oneof(
      fc.integer({ min: -2, max: 12 }),
      fc.string({ maxLength: 6 }),
      fc.constant(null),
      fc.double(),
    );
    const node = fc.oneof(
      fc.tuple(tag).chain(([name]) => fc.array(part, { maxLength: 6 }).map((rest) => [name, ...rest])),
      fc.constantFrom(
        ["T", "Uint8Array", "AAEC"],
        ["T", "Float64Array", "AAEC"],
        ["T", "Nope", ""],
        ["T", "ArrayBuffer", "@@@@"],
      ),
      fc.constantFrom(
        ["O", "__proto__", 1],
        ["O", "constructor", 1],
        ["R", "(", ""],
        ["B", "0x10"],
        ["B", ""],
      ),
      part,
    );
    const table = fc.array(node, { minLength: 1, maxLength: 12 }).map((nodes) => JSON.stringify(nodes));
    const mutated = fc.tuple(anyValue, fc.nat(), fc.string({ maxLength: 3 })).map(([value, at, insert]) => {
      const encoded = refusedOr(() => encodeWire(value)).value ?? "[0]";
      const position = at % (encoded.length + 1);
      return encoded.slice(0, position) + insert + encoded.slice(position + 1);
    });
    fc.assert(
      fc.property(fc.oneof(table, mutated, fc.string({ maxLength: 40 }), fc.json()), (text) => {
        const decoded = refusedOr(() => decodeWire(text, { maxExpandedBytes: LIMIT }));
        if (decoded.refusal === undefined)
          expect(measureValue(decoded.value, LIMIT)).toBeLessThanOrEqual(LIMIT);
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      }),
      { numRuns: 500, interruptAfterTimeLimit: 30_000 },
    );
  });

  test("a record decoded field by field refuses only the fields over the budget", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 30 }), { minLength: 1, maxLength: 6 }), (levels) => {
        const record: Record<string, unknown> = {};
        levels.forEach((level, index) => {
          let value: unknown = [1];
          for (let i = 0; i < level; i++) value = [value, value];
          record[`f${index}`] = value;
        });
        const refused: string[] = [];
        const decoded = decodeWire(encodeWire(record), {
          maxExpandedBytes: LIMIT,
          onRefused: (field) => refused.push(field),
        }) as Record<string, unknown>;
        expect([...Object.keys(decoded), ...refused].sort()).toEqual(Object.keys(record).sort());
        expect(measureValue(decoded, LIMIT + 100)).toBeLessThanOrEqual(LIMIT + 100);
      }),
      RUNS,
    );
  });
});

/** What a value looks like after a round trip: holes become undefined, a Buffer a Uint8Array of its bytes. */
function normalized(value: unknown, seen = new Map<object, unknown>()): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (seen.has(value)) return seen.get(value);
  if (Buffer.isBuffer(value)) return new Uint8Array(value);
  if (Array.isArray(value)) {
    const copy: unknown[] = [];
    seen.set(value, copy);
    for (let index = 0; index < value.length; index++) copy.push(normalized(value[index], seen));
    return copy;
  }
  if (value instanceof Map) {
    const copy = new Map();
    seen.set(value, copy);
    for (const [key, entry] of value) copy.set(normalized(key, seen), normalized(entry, seen));
    return copy;
  }
  if (value instanceof Set) {
    const copy = new Set();
    seen.set(value, copy);
    for (const entry of value) copy.add(normalized(entry, seen));
    return copy;
  }
  const prototype = Object.getPrototypeOf(value);
  if (prototype === null || prototype === Object.prototype) {
    const copy: Record<string, unknown> = {};
    seen.set(value, copy);
    for (const key of Object.keys(value)) {
      Object.defineProperty(copy, key, {
        value: normalized((value as Record<string, unknown>)[key], seen),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return copy;
  }
  return value;
}
