import { describe, expect, it } from "vitest";
import { decodeProperties, encodeProperties } from "../../engine/context/index.ts";
import { MossError } from "../../engine/errors.ts";

/** Encodes, goes through JSON text (as on disk), and decodes. */
function roundTrip(values: Record<string, unknown>): Record<string, unknown> {
  const { properties, warnings } = encodeProperties(values);
  expect(warnings).toEqual([]);
  return decodeProperties(JSON.parse(JSON.stringify(properties)));
}

describe("encodeProperties / decodeProperties round trips", () => {
  it("keeps primitives, including the ones JSON loses", () => {
    const values = {
      text: "hello",
      count: 3,
      flag: true,
      nothing: null,
      missing: undefined,
      big: 12345678901234567890n,
      nan: Number.NaN,
      infinity: Number.POSITIVE_INFINITY,
      negativeInfinity: Number.NEGATIVE_INFINITY,
      negativeZero: -0,
    };
    const back = roundTrip(values);
    expect(back).toEqual(values);
    expect("missing" in back).toBe(true);
    expect(back.missing).toBeUndefined();
    expect(typeof back.big).toBe("bigint");
    expect(Object.is(back.negativeZero, -0)).toBe(true);
    expect(Number.isNaN(back.nan)).toBe(true);
  });

  it("keeps Date, RegExp, Map, Set, URL and typed arrays with their types", () => {
    const values = {
      when: new Date("2024-05-06T07:08:09.010Z"),
      pattern: /ab+c/gi,
      scores: new Map<string, number>([
        ["ann", 1],
        ["bob", 2],
      ]),
      objectKeys: new Map<object, string>([[{ id: 1 }, "one"]]),
      tags: new Set(["a", "b"]),
      link: new URL("https://example.com/a?b=c"),
      bytes: new Uint8Array([1, 2, 255]),
      floats: new Float64Array([1.5, -2]),
    };
    const back = roundTrip(values);
    expect(back.when).toBeInstanceOf(Date);
    expect((back.when as Date).toISOString()).toBe("2024-05-06T07:08:09.010Z");
    expect(back.pattern).toBeInstanceOf(RegExp);
    expect(String(back.pattern)).toBe("/ab+c/gi");
    expect(back.scores).toBeInstanceOf(Map);
    expect([...(back.scores as Map<string, number>)]).toEqual([
      ["ann", 1],
      ["bob", 2],
    ]);
    expect([...(back.objectKeys as Map<object, string>)]).toEqual([[{ id: 1 }, "one"]]);
    expect(back.tags).toBeInstanceOf(Set);
    expect([...(back.tags as Set<string>)]).toEqual(["a", "b"]);
    expect(back.link).toBeInstanceOf(URL);
    expect(String(back.link)).toBe("https://example.com/a?b=c");
    expect(back.bytes).toBeInstanceOf(Uint8Array);
    expect([...(back.bytes as Uint8Array)]).toEqual([1, 2, 255]);
    expect(back.floats).toBeInstanceOf(Float64Array);
  });

  it("keeps nested structures, null-prototype objects, shared and circular references", () => {
    const shared = { label: "shared" };
    const circular: Record<string, unknown> = { name: "loop" };
    circular.self = circular;
    const dictionary = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1 });
    const values = {
      notes: [{ at: new Date(0), tags: new Set([1n]), extra: undefined }, "plain"],
      deep: { a: { b: { c: new Map([["k", [1, 2, { d: /x/ }]]]) } } },
      pair: [shared, shared],
      circular,
      dictionary,
    };
    const back = roundTrip(values);
    expect(back.notes).toEqual(values.notes);
    expect(((back.notes as unknown[])[0] as { tags: Set<bigint> }).tags.has(1n)).toBe(true);
    expect(back.deep).toEqual(values.deep);
    const pair = back.pair as object[];
    expect(pair[0]).toBe(pair[1]);
    const loop = back.circular as Record<string, unknown>;
    expect(loop.self).toBe(loop);
    expect(back.dictionary).toEqual({ a: 1 });
  });

  it("stores one JSON document { json, meta? } per field, detached from the live value", () => {
    const notes = ["first"];
    const { properties } = encodeProperties({ notes, when: new Date(0) });
    expect(Object.keys(properties)).toEqual(["notes", "when"]);
    expect(properties.notes).toEqual({ json: ["first"] });
    expect(properties.when).toEqual({ json: "1970-01-01T00:00:00.000Z", meta: { values: ["Date"], v: 1 } });
    notes.push("later");
    expect(properties.notes).toEqual({ json: ["first"] });
    const decoded = decodeProperties(properties);
    (decoded.notes as string[]).push("mutated");
    expect(properties.notes).toEqual({ json: ["first"] });
  });
});

describe("non-persistable values", () => {
  class SimulatedBall {
    roll(): void {}
  }

  it("warns for every kind of value superjson cannot carry and never stores it", () => {
    const revocable = Proxy.revocable({}, {});
    const values: Record<string, unknown> = {
      callback: () => 1,
      marker: Symbol("m"),
      ball: new SimulatedBall(),
      proxy: new Proxy({ a: 1 }, {}),
      revoked: revocable.proxy,
      failure: new TypeError("bad"),
      promise: Promise.resolve(1),
      weak: new WeakMap(),
      invalidDate: new Date(Number.NaN),
      keep: 1,
    };
    revocable.revoke();
    const { properties, warnings } = encodeProperties(values);
    expect(Object.keys(properties)).toEqual(["keep"]);
    expect(warnings).toEqual([
      "moss.callback is a function and was not persisted",
      "moss.marker is a symbol and was not persisted",
      "moss.ball is an instance of SimulatedBall and was not persisted",
      "moss.proxy is a proxy and was not persisted",
      "moss.revoked is a proxy and was not persisted",
      "moss.failure is an Error (persist its message instead) and was not persisted",
      "moss.promise is an instance of Promise and was not persisted",
      "moss.weak is an instance of WeakMap and was not persisted",
      "moss.invalidDate is an invalid Date (superjson would restore it as null) and was not persisted",
    ]);
  });

  it("names the nested path that makes a field non-persistable", () => {
    const withGetter = {
      get now() {
        return 1;
      },
    };
    const { properties, warnings } = encodeProperties({
      config: { handlers: [{ onChange: () => undefined }] },
      lookup: new Map<string, unknown>([["ball", new SimulatedBall()]]),
      bag: new Set([() => 1]),
      getter: withGetter,
      symbolKey: { [Symbol("k")]: 1 },
      "odd key": { fn: Math.max },
    });
    expect(properties).toEqual({});
    expect(warnings).toEqual([
      "moss.config was not persisted: moss.config.handlers[0].onChange is a function",
      'moss.lookup was not persisted: moss.lookup.get("ball") is an instance of SimulatedBall',
      "moss.bag was not persisted: moss.bag (item 0) is a function",
      "moss.getter was not persisted: moss.getter.now is a getter/setter",
      "moss.symbolKey has a symbol key Symbol(k) and was not persisted",
      'moss["odd key"] was not persisted: moss["odd key"].fn is a function',
    ]);
  });

  it("keeps the previous value of a field that cannot be persisted, and says so", () => {
    const first = encodeProperties({ callback: "was data", count: 1 });
    const second = encodeProperties({ callback: () => 2, count: 2 }, { previous: first.properties });
    expect(second.warnings).toEqual([
      "moss.callback is a function and was not persisted; its previous value is kept",
    ]);
    expect(decodeProperties(second.properties)).toEqual({ callback: "was data", count: 2 });
  });

  it("removes fields absent from the values even when a previous value exists", () => {
    const first = encodeProperties({ a: 1, b: 2 });
    const second = encodeProperties({ b: 3 }, { previous: first.properties });
    expect(decodeProperties(second.properties)).toEqual({ b: 3 });
  });

  it("uses the given path prefix in warnings", () => {
    const { warnings } = encodeProperties({ f: () => 1 }, { pathPrefix: "session" });
    expect(warnings).toEqual(["session.f is a function and was not persisted"]);
  });
});

describe("decodeProperties errors", () => {
  it("throws context-invalid naming a malformed field", () => {
    let error: unknown;
    try {
      decodeProperties({ good: { json: 1 }, bad: 42 });
    } catch (thrown) {
      error = thrown;
    }
    expect(MossError.is(error, "context-invalid")).toBe(true);
    expect((error as MossError).message).toBe("properties.bad must be an encoded value { json, meta? }");
  });

  it("throws context-invalid for meta superjson cannot apply", () => {
    expect(() =>
      decodeProperties({ bytes: { json: [1], meta: { values: [["typed-array", "Nope"]] } } }),
    ).toThrow(/properties\.bytes cannot be decoded/);
  });
});

describe("binary data and bounds (issue 8)", () => {
  const roundTrip = (values: Record<string, unknown>) =>
    decodeProperties(JSON.parse(JSON.stringify(encodeProperties(values).properties)));

  it("persists every kind of binary data, a Buffer as a Uint8Array of its own bytes", () => {
    const back = roundTrip({
      bytes: Buffer.from("abc"),
      wide: new BigInt64Array([-5n]),
      raw: new Uint8Array([1, 2]).buffer,
      view: new DataView(new Uint8Array([3, 4, 5]).buffer, 1, 2),
    });
    expect(Object.getPrototypeOf(back.bytes)).toBe(Uint8Array.prototype);
    expect([...(back.bytes as Uint8Array)]).toEqual([97, 98, 99]);
    expect((back.bytes as Uint8Array).buffer.byteLength).toBe(3);
    expect([...(back.wide as BigInt64Array)]).toEqual([-5n]);
    expect([...new Uint8Array(back.raw as ArrayBuffer)]).toEqual([1, 2]);
    expect((back.view as DataView).getUint8(0)).toBe(4);
  });

  it("keeps a Map entry keyed by NaN when the value holds another NaN (superjson gives NaN an identity)", () => {
    const back = roundTrip({ maps: [new Map([[1, Number.NaN]]), new Map([[Number.NaN, "kept"]])] });
    expect((back.maps as Array<Map<unknown, unknown>>)[1]!.get(Number.NaN)).toBe("kept");
  });

  it("refuses a field whose expanded value is over the bound, naming it and keeping the previous value", () => {
    let shared: unknown = [1];
    for (let i = 0; i < 40; i++) shared = [shared, shared];
    const previous = encodeProperties({ big: "old" }).properties;
    const { properties, warnings } = encodeProperties({ big: shared }, { previous, maxBytes: 1_000 });
    expect(properties.big).toEqual(previous.big);
    expect(warnings.join("\n")).toMatch(/moss\.big is larger than the limit of 1000 bytes once expanded/);
  });
});
