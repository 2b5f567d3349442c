import { describe, expect, test } from "vitest";
import { createWireCodec } from "../../engine/membrane/index.ts";

// The primitive fast path (issue 17) writes and reads the same wire text as the general codec, under the same
// limits: what it changes is only how much work a small value costs.
const codec = createWireCodec();

describe("wire codec: primitives and short flat arrays of them", () => {
  test("are written as the general codec writes them", () => {
    expect(codec.encode("text")).toBe('["text"]');
    expect(codec.encode(7.5)).toBe("[7.5]");
    expect(codec.encode(null)).toBe("[null]");
    expect(codec.encode([1, "two", true, null])).toBe('[["A",1,2,3,4],1,"two",true,null]');
    expect(codec.encode([])).toBe('[["A"]]');
  });

  test("keep every value exactly, the ones JSON cannot carry included", () => {
    const values: unknown[] = [
      0,
      -0,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      undefined,
      12n,
      "",
      "\u{1F600} \ud800",
      false,
      [-0, undefined, Number.NaN, 1n],
      [1, [2]],
      Array.from({ length: 40 }, (_, index) => index),
    ];
    for (const value of values) {
      const decoded = codec.decode(codec.encode(value));
      if (Array.isArray(value)) {
        expect(Array.isArray(decoded)).toBe(true);
        const items = decoded as unknown[];
        expect(items.length).toBe(value.length);
        value.forEach((item, index) => {
          if (Array.isArray(item)) expect(items[index]).toEqual(item);
          else expect(Object.is(items[index], item)).toBe(true);
        });
      } else expect(Object.is(decoded, value)).toBe(true);
    }
    // A hole reads as undefined, as the general codec writes it.
    const sparse = [1, 2, 3];
    delete sparse[1];
    const holey = codec.decode(codec.encode(sparse)) as unknown[];
    expect(1 in holey).toBe(true);
    expect(holey[1]).toBeUndefined();
  });

  test("obey the same limits, with the same messages", () => {
    expect(() => codec.encode("x".repeat(100), { maxExpanded: 50, rootPath: "returns" })).toThrow(
      /returns is larger than the limit of 50 bytes once expanded/,
    );
    expect(() => codec.encode(["x".repeat(30), "y".repeat(30)], { maxExpanded: 50 })).toThrow(
      /larger than the limit of 50 bytes/,
    );
    expect(() => codec.encode("x".repeat(100), { maxLength: 50 })).toThrow(
      /exceeds the limit of 50 characters/,
    );
    expect(() => codec.decode(JSON.stringify(["x".repeat(100)]), { maxExpanded: 50 })).toThrow(
      /larger than the limit of 50 bytes/,
    );
    expect(() =>
      codec.decode('[["A",1,2],"aaaaaaaaaaaaaaaaaaaa","bbbbbbbbbbbbbbbbbbbb"]', { maxExpanded: 40 }),
    ).toThrow(/larger than the limit of 40 bytes/);
    // Exactly at the limit still fits: "abc" expands to 5 bytes, the array to 2 + 1 + 5.
    expect(codec.decode('["abc"]', { maxExpanded: 5 })).toBe("abc");
    expect(codec.decode('[["A",1],"abc"]', { maxExpanded: 8 })).toEqual(["abc"]);
    expect(() => codec.decode('[["A",1],"abc"]', { maxExpanded: 7 })).toThrow(
      /larger than the limit of 7 bytes/,
    );
  });

  test("malformed text is refused as before", () => {
    expect(() => codec.decode('[["A",2],1]')).toThrow(/invalid wire text/);
    expect(() => codec.decode('[["A",1,1],1]')).not.toThrow();
    expect(() => codec.decode("[]")).toThrow(/invalid wire text/);
    expect(() => codec.decode('[{"a":1}]')).toThrow(/invalid wire text/);
  });
});
