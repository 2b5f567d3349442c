import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { parseContextText } from "../../engine/context/context-file.ts";
import { decodeProperties, encodeProperties } from "../../engine/context/encode-properties.ts";
import { measureValue } from "../../engine/context/measure-value.ts";
import { MossError } from "../../engine/errors.ts";
import { WIRE_MAX_BIGINT_DIGITS } from "../../engine/membrane/host/host-wire.ts";

/*
 * Property-based tests of the context encoding and decoder: random and hostile values and documents round-trip,
 * are refused by name (a warning when encoding, a MossError when decoding), never throw anything else, never hang
 * (bounded run counts and sizes) and never decode past the size bound.
 */

const LIMIT = 64 * 1024;
const RUNS = { numRuns: 200, interruptAfterTimeLimit: 30_000 } as const;

function refusedOr<T>(action: () => T): { value?: T; refusal?: MossError } {
  try {
    return { value: action() };
  } catch (error) {
    if (!MossError.is(error)) throw error;
    expect(["context-invalid", "context-corrupt"]).toContain(error.code);
    return { refusal: error };
  }
}

const oddKey = fc.oneof(
  fc.constantFrom("__proto__", "constructor", "prototype", "toString", "", "a.b", "a\\.b", "0"),
  fc.string({ maxLength: 6 }),
);

const binary = fc.oneof(
  fc.uint8Array({ maxLength: 32 }),
  fc.int32Array({ maxLength: 8 }),
  fc.float32Array({ maxLength: 8 }),
  fc.bigUint64Array({ maxLength: 4 }),
  fc.uint8Array({ maxLength: 16 }).map((bytes) => bytes.buffer),
  fc.uint8Array({ minLength: 1, maxLength: 16 }).map((bytes) => new DataView(bytes.buffer, 1)),
  fc.uint8Array({ maxLength: 16 }).map((bytes) => Buffer.from(bytes)),
);

const leaf = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }),
  fc.date({ noInvalidDate: false }),
  fc.constantFrom(/x+/g, -0, Number.NaN, Number.POSITIVE_INFINITY),
  binary,
  fc.constantFrom(
    () => 1,
    Symbol("s"),
    new (class Point {})(),
    new Error("e"),
    new URL("https://example.com/a"),
  ),
);

const { value: anyValue } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    leaf,
    fc.array(tie("value"), { maxLength: 5 }),
    fc.sparseArray(tie("value"), { maxLength: 6 }),
    fc.dictionary(oddKey, tie("value"), { maxKeys: 4 }),
    fc.array(fc.tuple(tie("value"), tie("value")), { maxLength: 3 }).map((entries) => new Map(entries)),
    fc.array(tie("value"), { maxLength: 3 }).map((items) => new Set(items)),
  ),
}));

/**
 * Values whose containers (arrays, objects, Maps, Sets, Dates, URLs) share one pool of nodes, so objects are
 * shared between places and hold references back to their ancestors, in Map keys and Set members too.
 */
const sharedGraph = fc
  .array(
    fc.record({
      kind: fc.constantFrom("array", "object", "map", "set", "date", "url"),
      entries: fc.array(
        fc.tuple(
          fc.oneof(oddKey, fc.nat(9)),
          fc.oneof(fc.nat(9), leaf),
          fc.oneof({ weight: 3, arbitrary: fc.nat(9) }, leaf),
        ),
        { maxLength: 4 },
      ),
    }),
    { minLength: 1, maxLength: 10 },
  )
  .map((specs) => {
    const nodes = specs.map(({ kind }) =>
      kind === "array"
        ? []
        : kind === "object"
          ? {}
          : kind === "map"
            ? new Map()
            : kind === "set"
              ? new Set()
              : kind === "date"
                ? new Date(0)
                : new URL("https://example.com/a"),
    );
    // A number picks a node of the pool; anything else is itself.
    const pick = (choice: unknown) => (typeof choice === "number" ? nodes[choice % nodes.length] : choice);
    specs.forEach(({ kind, entries }, index) => {
      const node = nodes[index];
      for (const [name, key, item] of entries) {
        if (kind === "array") (node as unknown[]).push(pick(item));
        if (
          kind === "object" &&
          typeof name === "string" &&
          !["__proto__", "constructor", "prototype"].includes(name)
        )
          (node as Record<string, unknown>)[name] = pick(item);
        if (kind === "map") (node as Map<unknown, unknown>).set(pick(key), pick(item));
        if (kind === "set") (node as Set<unknown>).add(pick(item));
      }
    });
    return nodes[0];
  });

describe("context fuzz", () => {
  test("random values are persisted and round-trip, or are left out with a warning naming the field", () => {
    fc.assert(
      fc.property(anyValue, (value) => {
        const { properties, warnings } = encodeProperties({ field: value }, { maxBytes: LIMIT });
        if (!Object.hasOwn(properties, "field")) {
          expect(warnings.join("\n")).toMatch(/moss\.field/);
          return;
        }
        // What was persisted decodes to a value within the bound, and re-encodes to the same document.
        const text = JSON.stringify(properties);
        const decoded = decodeProperties(JSON.parse(text), { maxBytes: LIMIT });
        expect(measureValue(decoded.field, LIMIT)).toBeLessThanOrEqual(LIMIT);
        expect(JSON.stringify(encodeProperties(decoded, { maxBytes: LIMIT }).properties)).toBe(text);
      }),
      RUNS,
    );
  });

  test("shared and circular values round-trip with the same identities and order, or are left out by name", () => {
    fc.assert(
      fc.property(sharedGraph, (value) => {
        const { properties, warnings } = encodeProperties({ field: value }, { maxBytes: LIMIT });
        if (!Object.hasOwn(properties, "field")) {
          expect(warnings.join("\n")).toMatch(/moss\.field/);
          return;
        }
        // The re-encoded document names the same shared paths: identities, entries and their order are kept.
        const text = JSON.stringify(properties);
        const decoded = decodeProperties(JSON.parse(text), { maxBytes: LIMIT });
        expect(JSON.stringify(encodeProperties(decoded, { maxBytes: LIMIT }).properties)).toBe(text);
      }),
      RUNS,
    );
  });

  test("exponential and deep values are refused by name when persisting", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 1_500 }), (levels, depth) => {
        let value: unknown = [1];
        for (let i = 0; i < levels; i++) value = [value, { value }];
        let deep: unknown = 0;
        for (let i = 0; i < depth; i++) deep = { deep };
        const { properties, warnings } = encodeProperties({ wide: value, deep }, { maxBytes: LIMIT });
        for (const field of ["wide", "deep"]) {
          if (!Object.hasOwn(properties, field))
            expect(warnings.join("\n")).toMatch(new RegExp(`moss\\.${field} `));
        }
        expect(JSON.stringify(properties).length).toBeLessThan(8 * LIMIT);
      }),
      { numRuns: 80 },
    );
  });

  test("hostile superjson documents decode within the bound or are refused with context-invalid", () => {
    const annotation = fc.oneof(
      fc.constantFrom(
        "undefined",
        "bigint",
        "Date",
        "regexp",
        "set",
        "map",
        "Error",
        "number",
        "symbol",
        "URL",
      ),
      fc.constantFrom(["class", "Nope"], ["custom", "binary"], ["custom", "nope"], ["typed-array", "Nope"]),
      fc.constantFrom(["map", { "0": ["bigint"] }], ["set", {}], ["custom", "binary"]),
    );
    const path = fc.oneof(
      fc.constantFrom("", "0", "a", "a.0", "__proto__", "constructor.prototype", "a.__proto__.x"),
      oddKey,
    );
    const meta = fc.record(
      {
        values: fc.oneof(
          annotation.map((a) => [a]),
          fc.dictionary(
            path,
            annotation.map((a) => [a]),
            { maxKeys: 3 },
          ),
        ),
        referentialEqualities: fc.dictionary(path, fc.array(path, { maxLength: 3 }), { maxKeys: 3 }),
      },
      { requiredKeys: [] },
    );
    const encoded = fc.record({
      json: fc.oneof(
        fc.jsonValue(),
        fc.constant({ kind: "Uint8Array", base64: "AAE=" }),
        fc.constant("9".repeat(5000)),
      ),
      meta,
    });
    fc.assert(
      fc.property(fc.dictionary(oddKey, encoded, { maxKeys: 3 }), (properties) => {
        const decoded = refusedOr(() => decodeProperties(properties, { maxBytes: LIMIT }));
        if (decoded.value !== undefined) {
          for (const value of Object.values(decoded.value)) {
            expect(measureValue(value, LIMIT)).toBeLessThanOrEqual(LIMIT);
          }
        }
        expect(({} as Record<string, unknown>).x).toBeUndefined();
      }),
      { numRuns: 400, interruptAfterTimeLimit: 30_000 },
    );
  });

  test("referential equalities that expand exponentially are refused before anything is expanded", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), (levels) => {
        const json: Record<string, unknown> = { l0: [1] };
        const equalities: Record<string, string[]> = {};
        for (let i = 1; i <= levels; i++) {
          json[`l${i}`] = [null, null];
          equalities[`l${i - 1}`] = [`l${i}.0`, `l${i}.1`];
        }
        const decoded = refusedOr(() =>
          decodeProperties(
            { field: { json, meta: { referentialEqualities: equalities } } },
            { maxBytes: LIMIT },
          ),
        );
        if (decoded.refusal)
          expect(decoded.refusal.message).toMatch(/properties\.field is larger than the limit/);
        else expect(measureValue(decoded.value!.field, LIMIT)).toBeLessThanOrEqual(LIMIT);
      }),
      { numRuns: 60 },
    );
  });

  test("a bigint over the digit bound in a document is refused before it is parsed", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 * WIRE_MAX_BIGINT_DIGITS }), (digits) => {
        const decoded = refusedOr(() =>
          decodeProperties({ big: { json: "7".repeat(digits), meta: { values: ["bigint"] } } }),
        );
        expect(decoded.refusal === undefined).toBe(digits <= WIRE_MAX_BIGINT_DIGITS);
      }),
      { numRuns: 40 },
    );
  });

  test("garbled context files are read or refused with a MossError, never anything else", () => {
    const document = fc.record(
      {
        version: fc.oneof(fc.constant(1), fc.jsonValue()),
        module: fc.oneof(fc.string(), fc.jsonValue()),
        properties: fc.oneof(fc.dictionary(oddKey, fc.jsonValue(), { maxKeys: 3 }), fc.jsonValue()),
        executed: fc.oneof(fc.boolean(), fc.jsonValue()),
        code: fc.jsonValue(),
      },
      { requiredKeys: [] },
    );
    const text = fc.oneof(
      document.map((value) => JSON.stringify(value)),
      fc.tuple(document, fc.nat(), fc.string({ maxLength: 2 })).map(([value, at, insert]) => {
        const json = JSON.stringify(value);
        const position = at % (json.length + 1);
        return json.slice(0, position) + insert + json.slice(position + 1);
      }),
      fc.string({ maxLength: 30 }),
      fc.integer({ min: 1, max: 50_000 }).map((depth) => `${"[".repeat(depth)}${"]".repeat(depth)}`),
    );
    fc.assert(
      fc.property(text, (source) => {
        const parsed = refusedOr(() => parseContextText(source, "context.json"));
        if (parsed.value === undefined) return;
        refusedOr(() => decodeProperties(parsed.value!.properties, { maxBytes: LIMIT }));
      }),
      { numRuns: 400, interruptAfterTimeLimit: 30_000 },
    );
  });
});
