import vm from "node:vm";
import { describe, expect, test } from "vitest";
import { measureValue } from "../../engine/context/measure-value.ts";
import {
  createWireCodec,
  decodeWire,
  encodeWire,
  joinWireRecord,
  measureWire,
  splitWireRecord,
  WIRE_MAX_BIGINT_DIGITS,
} from "../../engine/membrane/index.ts";
import { isolateScript } from "../../engine/membrane/isolate-script.ts";
import type { HandleShape } from "../../engine/sandbox/sandbox.ts";

const roundTrip = (value: unknown) => decodeWire(encodeWire(value));

describe("wire codec", () => {
  test("joinWireRecord joins values encoded on their own into one record; none shares a node with another", () => {
    const shared = { n: 1 };
    const nested = { list: [shared, shared], map: new Map([["k", new Set([shared])]]), text: "t" };
    const joined = decodeWire(
      joinWireRecord([
        ["first", encodeWire(nested)],
        ["second", encodeWire(shared)],
        ["third", encodeWire([1, [2, { three: 3 }]])],
      ]),
    ) as { first: typeof nested; second: { n: number }; third: unknown };
    expect(joined).toEqual({ first: nested, second: { n: 1 }, third: [1, [2, { three: 3 }]] });
    // Shared within a value it stays shared; across values it is not.
    expect(joined.first.list[0]).toBe(joined.first.list[1]);
    expect(joined.second).not.toBe(joined.first.list[0]);
  });

  test("special numbers, bigint and undefined survive", () => {
    const value = {
      nan: Number.NaN,
      inf: Infinity,
      ninf: -Infinity,
      negativeZero: -0,
      big: 12345678901234567890n,
      none: undefined,
    };
    const back = roundTrip(value) as typeof value;
    expect(back.nan).toBeNaN();
    expect(back.inf).toBe(Infinity);
    expect(back.ninf).toBe(-Infinity);
    expect(Object.is(back.negativeZero, -0)).toBe(true);
    expect(back.big).toBe(12345678901234567890n);
    expect("none" in back).toBe(true);
    expect(back.none).toBeUndefined();
    expect(roundTrip(undefined)).toBeUndefined();
    expect(roundTrip([undefined, null, 1.5, "s", true])).toEqual([undefined, null, 1.5, "s", true]);
  });

  test("Date, RegExp, Map, Set and Error survive", () => {
    const value = {
      when: new Date("2024-05-01T10:00:00Z"),
      invalid: new Date(Number.NaN),
      pattern: /a+b/gi,
      map: new Map<unknown, unknown>([
        ["k", 1],
        [2, new Set(["x"])],
      ]),
      error: Object.assign(new TypeError("bad input"), { code: "E_BAD" }),
    };
    const back = roundTrip(value) as typeof value;
    expect(back.when).toBeInstanceOf(Date);
    expect(back.when.toISOString()).toBe("2024-05-01T10:00:00.000Z");
    expect(Number.isNaN(back.invalid.getTime())).toBe(true);
    expect(back.pattern).toEqual(/a+b/gi);
    expect(back.map.get("k")).toBe(1);
    expect(back.map.get(2)).toEqual(new Set(["x"]));
    expect(back.error).toBeInstanceOf(TypeError);
    expect(back.error.message).toBe("bad input");
    expect((back.error as Error & { code?: string }).code).toBe("E_BAD");
    expect(back.error.stack).not.toContain("wire.test.ts");
  });

  test("shared and cyclic references survive", () => {
    const shared = { n: 1 };
    const cyclic: Record<string, unknown> = { shared, again: shared };
    cyclic.self = cyclic;
    const list: unknown[] = [];
    list.push(list);
    const back = roundTrip(cyclic) as Record<string, unknown>;
    expect(back.self).toBe(back);
    expect(back.shared).toBe(back.again);
    const backList = roundTrip(list) as unknown[];
    expect(backList[0]).toBe(backList);
  });

  test("a __proto__ key is data, never a prototype", () => {
    const text = JSON.stringify([["O", "__proto__", 1], ["O", "polluted", 2], true]);
    const back = decodeWire(text) as Record<string, unknown>;
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.hasOwn(back, "__proto__")).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  test("values that cannot cross are reported by path, or rejected without a reporter", () => {
    class Point {
      x = 1;
      norm() {
        return this.x;
      }
    }
    const reported: string[] = [];
    const text = encodeWire(
      { fn: () => 1, nested: { point: new Point(), symbol: Symbol("s") }, list: [1, () => 2] },
      {
        rootPath: "moss",
        onUnsupported: ({ path, description }) => reported.push(`${path} is ${description}`),
      },
    );
    expect(reported).toEqual([
      "moss.fn is a function",
      "moss.nested.point is an instance of Point",
      "moss.nested.symbol is a symbol",
      "moss.list[1] is a function",
    ]);
    expect(decodeWire(text)).toEqual({ nested: {}, list: [1, undefined] });
    expect(() => encodeWire({ fn: () => 1 })).toThrow(/value\.fn is a function/);
  });

  test("host objects become handles and come back through onHandle", () => {
    class Service {
      ping() {
        return "pong";
      }
    }
    const service = new Service();
    const shapes = new Map<number, object>();
    const text = encodeWire(
      { service, again: service },
      {
        onHostObject: (object) => {
          const shape: HandleShape = { id: 7, kind: "object", methods: ["ping"], properties: [] };
          shapes.set(shape.id, object);
          return shape;
        },
      },
    );
    const back = decodeWire(text, { onHandle: (shape) => shapes.get(shape.id) }) as Record<string, unknown>;
    expect(back.service).toBe(service);
    expect(back.again).toBe(service);
    expect(() => decodeWire(text)).toThrow(/handle/);
  });

  test("malformed text fails with a clear TypeError", () => {
    expect(() => decodeWire("not json")).toThrow(/invalid wire text/);
    expect(() => decodeWire("[]")).toThrow(/invalid wire text/);
    expect(() => decodeWire('[["A", 5]]')).toThrow(/bad node index 5/);
    expect(() => decodeWire('[["Q"]]')).toThrow(/bad node 0/);
  });

  // One source per rule (issue 17): the measurer, which every decode and every split of a snapshot runs, checks each
  // leaf as the decoder builds it, so a text it measured decodes, and a stored field is one the decoder accepts.
  test.each([
    ["a special number it does not name", '["N","nan"]'],
    ["a bigint of something other than digits", '["B","0x10"]'],
    ["a bigint of no digits", '["B","-"]'],
    ["a RegExp whose source does not compile", '["R","(","g"]'],
    ["a RegExp with unknown flags", '["R","a","zz"]'],
    ["binary data with a character outside base64", '["T","Uint8Array","AB@D"]'],
    ["binary data with padding inside", '["T","Uint8Array","A=AA"]'],
    ["a Date of text", '["D","x"]'],
  ])("%s is refused alike by measureWire, decodeWire and splitWireRecord", (_name, node) => {
    const invalid = expect.objectContaining({
      code: "wire-invalid",
      message: expect.stringMatching(/bad node 1/),
    });
    const single = `[["O","field",1],${node}]`;
    expect(() => measureWire(single)).toThrow(invalid);
    expect(() => decodeWire(single)).toThrow(invalid);
    const kept: string[] = [];
    const split = (text: string) =>
      splitWireRecord(text, { onRefused: () => {}, onField: (field) => kept.push(field) });
    expect(() => split(single)).toThrow(invalid);
    // Several fields: the field holding it is copied out node by node, and refused the same way.
    expect(() => split(`[["O","field",1,"other",2],${node},3]`)).toThrow(invalid);
    expect(kept).toEqual([]);
  });

  test("splitWireRecord refuses a handle in a data field; a record of plain data is kept as it came", () => {
    const handle = '["H",{"id":1,"kind":"object","methods":[],"properties":[]}]';
    const fields: Array<[string, string]> = [];
    const split = (text: string) =>
      splitWireRecord(text, { onRefused: () => {}, onField: (field, wire) => fields.push([field, wire]) });
    expect(() => split(`[["O","field",1],${handle}]`)).toThrow(/a handle where none is accepted/);
    expect(() => split(`[["O","field",1,"other",2],["A",2],${handle}]`)).toThrow(
      /a handle where none is accepted/,
    );
    const text = encodeWire({
      field: [1, -0, 2n, /a/g, new Date(3), new Uint8Array([1, 2]), new Set(["s"])],
    });
    split(text);
    expect(fields).toEqual([["field", text]]);
    expect(decodeWire(text)).toEqual({
      field: [1, -0, 2n, /a/g, new Date(3), new Uint8Array([1, 2]), new Set(["s"])],
    });
  });

  test("a Date crosses as its time or as null when invalid; a Date node holding anything else is refused", () => {
    for (const time of [0, -8.64e15, 8.64e15, 1_767_323_045_123]) {
      expect((roundTrip(new Date(time)) as Date).getTime()).toBe(time);
    }
    expect(Number.isNaN((roundTrip(new Date(Number.NaN)) as Date).getTime())).toBe(true);
    for (const node of ['["D","0"]', '["D"]', '["D",8.64e15,1]', '["D",8640000000000001]', '["D",0.5]']) {
      expect(() => decodeWire(`[${node}]`)).toThrow(/invalid wire text: bad node 0/);
    }
  });

  test("maxLength bounds the encoding", () => {
    const codec = createWireCodec();
    expect(() => codec.encode("x".repeat(1000), { maxLength: 100 })).toThrow(
      expect.objectContaining({ name: "WireLimitError" }),
    );
    expect(codec.encode("x".repeat(10), { maxLength: 100 })).toBe(JSON.stringify(["x".repeat(10)]));
  });

  test("the isolate script's codec is self-contained and interoperates from another realm", () => {
    const context = vm.createContext({});
    const script = isolateScript();
    expect(script).not.toMatch(/\b__name\d*\b/);
    expect(script).not.toMatch(/\b(import|require)\s*\(/);
    const codec = vm.runInContext(`"use strict"; ${script}; mossIsolate.createWireCodec()`, context);
    const text = codec.encode(
      vm.runInContext("({ when: new Date(5), set: new Set([1n]), map: new Map([['a', -0]]) })", context),
    );
    const back = decodeWire(text) as { when: Date; set: Set<bigint>; map: Map<string, number> };
    expect(back.when.getTime()).toBe(5);
    expect(back.set.has(1n)).toBe(true);
    expect(Object.is(back.map.get("a"), -0)).toBe(true);
    expect(codec.decode(encodeWire({ list: [1, 2] })).list).toHaveLength(2);
  });

  test("binary data crosses as a copy of exactly its bytes: a Buffer never brings its pool", () => {
    const pooled = Buffer.from("abc");
    expect(pooled.buffer.byteLength).toBeGreaterThan(3);
    const back = roundTrip({ pooled, view: new DataView(new Uint8Array([1, 2, 3]).buffer, 1, 1) }) as {
      pooled: Uint8Array;
      view: DataView;
    };
    expect(Object.getPrototypeOf(back.pooled)).toBe(Uint8Array.prototype);
    expect([...back.pooled]).toEqual([97, 98, 99]);
    expect(back.pooled.buffer.byteLength).toBe(3);
    back.pooled[0] = 0;
    expect(pooled.toString()).toBe("abc");
    expect(back.view.byteLength).toBe(1);
    expect(back.view.getUint8(0)).toBe(2);
  });

  test("shared references are measured as expanded before anything is built", () => {
    // [v, v] nested 60 times: 61 nodes on the wire, 2^60 leaves once expanded.
    const nodes: unknown[] = Array.from({ length: 60 }, (_, index) => ["A", index + 1, index + 1]);
    nodes.push(1);
    const text = JSON.stringify(nodes);
    expect(() => decodeWire(text)).toThrow(expect.objectContaining({ code: "wire-limit" }));
    expect(() => measureWire(text, 1_000)).toThrow(/larger than the limit of 1000 bytes once expanded/);
    // A smaller one fits, and the host value it decodes to measures the same.
    const small = JSON.stringify([
      ...Array.from({ length: 10 }, (_, index) => ["A", index + 1, index + 1]),
      1,
    ]);
    expect(measureWire(small)).toBe(measureValue(decodeWire(small), Number.POSITIVE_INFINITY));
  });

  test("text far longer than any honest encoding of a value within the budget is refused unparsed", () => {
    const text = JSON.stringify(["x".repeat(7_000)]);
    expect(() => decodeWire(text, { maxExpandedBytes: 1_000 })).toThrow(/more than 6 times the limit/);
  });

  test("bigints are capped at WIRE_MAX_BIGINT_DIGITS digits on both ends", () => {
    const limit = 10n ** BigInt(WIRE_MAX_BIGINT_DIGITS);
    expect(roundTrip(limit - 1n)).toBe(limit - 1n);
    expect(() => encodeWire(limit)).toThrow(expect.objectContaining({ code: "wire-limit" }));
    expect(() => decodeWire(JSON.stringify([["B", "9".repeat(WIRE_MAX_BIGINT_DIGITS + 1)]]))).toThrow(
      /bigint/,
    );
    expect(() => decodeWire(JSON.stringify([["B", "0x10"]]))).toThrow(
      expect.objectContaining({ code: "wire-invalid" }),
    );
  });
});
