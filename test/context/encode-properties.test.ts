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

describe("shared objects in Sets and Maps keep their entries in order (superjson reorders them)", () => {
  /** The document re-encoded after a round trip: equal to the first one when nothing moved. */
  const reEncoded = (values: Record<string, unknown>) => {
    const text = JSON.stringify(encodeProperties(values).properties);
    return { text, again: JSON.stringify(encodeProperties(decodeProperties(JSON.parse(text))).properties) };
  };

  it("keeps the order of a Map whose key is shared with another place (context-fuzz counterexample)", () => {
    const url = new URL("https://example.com/a");
    const field = [
      new Map([
        [
          new Map<unknown, unknown>([
            [url, ""],
            [[], []],
          ]),
          undefined,
        ],
      ]),
      new Map([[new Set(), url]]),
    ];
    const { text, again } = reEncoded({ field });
    expect(again).toBe(text);
    const back = roundTrip({ field }).field as [Map<Map<unknown, unknown>, unknown>, Map<unknown, unknown>];
    const inner = [...back[0].keys()][0]!;
    const keys = [...inner.keys()];
    expect(keys[0]).toBeInstanceOf(URL);
    expect(keys[1]).toEqual([]);
    expect(inner.get(keys[0])).toBe("");
    expect(keys[0]).toBe([...back[1].values()][0]);
  });

  it("decodes a document as superjson wrote it (the persisted format is unchanged)", () => {
    const text =
      '{"json":[[[[["https://example.com/a",""],[[],[]]],null]],[[[],"https://example.com/a"]]],"meta":{"values":{"0":["map",{"0.0":["map",{"0.0":["URL"]}],"0.1":["undefined"]}],"1":["map",{"0.0":["set"],"0.1":["URL"]}]},"referentialEqualities":{"1.0.1":["0.0.0.0.0"]},"v":1}}';
    const back = decodeProperties({ field: JSON.parse(text) }).field as Array<Map<unknown, unknown>>;
    const inner = [...back[0]!.keys()][0] as Map<unknown, unknown>;
    expect([...inner.keys()].map(String)).toEqual(["https://example.com/a", ""]);
    expect([...inner.keys()][0]).toBe([...back[1]!.values()][0]);
    expect(JSON.stringify(encodeProperties({ field: back }).properties.field)).toBe(text);
  });

  it("keeps every shared Set member, in order, as the shared object", () => {
    const a = { tag: "a" };
    const b = { tag: "b" };
    const c = { tag: "c" };
    const { text, again } = reEncoded({ field: { set: new Set([a, "x", b, c]), a, b, c } });
    expect(again).toBe(text);
    const back = decodeProperties(JSON.parse(text)).field as {
      set: Set<unknown>;
      a: object;
      b: object;
      c: object;
    };
    expect([...back.set]).toEqual([{ tag: "a" }, "x", { tag: "b" }, { tag: "c" }]);
    expect([...back.set]).toEqual([back.a, "x", back.b, back.c]);
    expect([...back.set][0]).toBe(back.a);
    expect([...back.set][2]).toBe(back.b);
    expect([...back.set][3]).toBe(back.c);
  });

  it("keeps every shared Map key with its own value, in order", () => {
    const a = { tag: "a" };
    const b = { tag: "b" };
    const map = new Map<unknown, unknown>([
      [a, 1],
      ["plain", 2],
      [b, a],
    ]);
    const { text, again } = reEncoded({ field: { map, a, b } });
    expect(again).toBe(text);
    const back = decodeProperties(JSON.parse(text)).field as {
      map: Map<unknown, unknown>;
      a: object;
      b: object;
    };
    expect([...back.map.keys()]).toEqual([back.a, "plain", back.b]);
    expect([...back.map.keys()][0]).toBe(back.a);
    expect([...back.map.keys()][2]).toBe(back.b);
    expect(back.map.get(back.a)).toBe(1);
    expect(back.map.get("plain")).toBe(2);
    expect(back.map.get(back.b)).toBe(back.a);
  });

  it("keeps what is shared inside a shared object whose first copy is not its shortest path", () => {
    // superjson names the shortest path as the source but writes inner paths under the first copy it met.
    const a = { tag: "a" };
    const b = { inner: a };
    const { text, again } = reEncoded({ field: [[a, [[b]]], [b]] });
    expect(again).toBe(text);
    const back = decodeProperties(JSON.parse(text)).field as [[object, [[{ inner: object }]]], [object]];
    expect(back[1][0]).toBe(back[0][1][0][0]);
    expect(back[0][1][0][0].inner).toBe(back[0][0]);
    // A reference back to the root inside such an object (ravionhq/superjson#361).
    const user: Record<string, unknown> = { name: "ann" };
    const post = { author: user };
    user.posts = [post];
    user.featured = post;
    const backUser = roundTrip({ user }).user as { posts: Array<{ author: unknown }>; featured: unknown };
    expect(backUser.featured).toBe(backUser.posts[0]);
    expect(backUser.posts[0]!.author).toBe(backUser);
  });

  it("keeps every Set member and Map key that refers back to an ancestor (written as null)", () => {
    const set = new Set<unknown>();
    set.add(set).add(null).add([set]);
    const map = new Map<unknown, unknown>();
    const holder = [map];
    map.set(map, 1).set(holder, 2).set(null, 3);
    const { text, again } = reEncoded({ set, holder });
    expect(again).toBe(text);
    const back = decodeProperties(JSON.parse(text)) as { set: Set<unknown>; holder: [Map<unknown, unknown>] };
    const members = [...back.set];
    expect(members).toHaveLength(3);
    expect(members[0]).toBe(back.set);
    expect(members[1]).toBeNull();
    expect((members[2] as unknown[])[0]).toBe(back.set);
    const backMap = back.holder[0];
    expect([...backMap.keys()]).toEqual([backMap, back.holder, null]);
    expect([...backMap.values()]).toEqual([1, 2, 3]);
  });

  it("keeps nested Maps and Sets keyed by shared objects, and a shared root, in order", () => {
    const a = { tag: "a" };
    const b = new Set([a]);
    const inner = new Map<unknown, unknown>([
      [a, "first"],
      [b, "second"],
      [new Date(0), "third"],
    ]);
    const root: Record<string, unknown> = {
      outer: new Map<unknown, unknown>([
        [inner, new Set([b, a])],
        ["k", inner],
      ]),
      a,
      nan: [Number.NaN, new Map([[Number.NaN, "kept"]])],
    };
    root.self = root;
    const { text, again } = reEncoded({ field: root });
    expect(again).toBe(text);
    const back = decodeProperties(JSON.parse(text)).field as Record<string, unknown>;
    expect(back.self).toBe(back);
    const outer = back.outer as Map<unknown, unknown>;
    const [innerBack, key] = [...outer.keys()] as [Map<unknown, unknown>, string];
    expect(key).toBe("k");
    expect(outer.get("k")).toBe(innerBack);
    expect([...innerBack.values()]).toEqual(["first", "second", "third"]);
    const [keyA, keyB, keyDate] = [...innerBack.keys()] as [object, Set<unknown>, Date];
    expect(keyA).toBe(back.a);
    expect([...keyB]).toEqual([back.a]);
    expect([...keyB][0]).toBe(back.a);
    expect(keyDate).toEqual(new Date(0));
    const members = [...(outer.get(innerBack) as Set<unknown>)];
    expect(members[0]).toBe(keyB);
    expect(members[1]).toBe(back.a);
    expect(((back.nan as unknown[])[1] as Map<number, string>).get(Number.NaN)).toBe("kept");
  });
});
