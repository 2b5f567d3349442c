import { describe, expect, test } from "vitest";
import { createWireCodec } from "../../engine/membrane/index.ts";

// Persisting only changed data fields (issue 17): the isolate keeps the encoder's node table of the last snapshot
// and asks `sameWireValue` whether a field's value would encode to the same nodes. A false "same" loses data, so
// every pair below differs in a way a JSON text of it would not see, or only in sharing.
const codec = createWireCodec();
const notHost = () => false;

/** Whether `after` would encode as `before` did, asked the way the isolate asks (one field of a snapshot). */
function sameAs(before: unknown, after: unknown): boolean {
  const snapshot = codec.encodeFields({ memo: before }, ["memo"], { onRefused: () => {} });
  const root = snapshot.nodes[0] as unknown[];
  expect(root[1]).toBe("memo");
  return codec.sameWireValue(after, snapshot.nodes, root[2] as number, notHost, snapshot.shares);
}

const circular = () => {
  const loop: Record<string, unknown> = { name: "loop" };
  loop.self = loop;
  return loop;
};
const sharedPair = () => {
  const shared = { v: 1 };
  return { a: shared, b: shared };
};

/** Objects `a`…`d`, each one of two equal objects as `which` says (so only the sharing tells them apart). */
const pairOfPairs = (which: number[]) => {
  const objects = [{ v: 1 }, { v: 1 }];
  return { a: objects[which[0]!], b: objects[which[1]!], c: objects[which[2]!], d: objects[which[3]!] };
};

describe("sameWireValue against an encoder's node table", () => {
  test.each<[string, () => unknown]>([
    ["strings, numbers, booleans, null", () => ({ s: "x", n: 1.5, t: true, z: null })],
    [
      "-0, NaN and the infinities",
      () => [-0, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY],
    ],
    ["bigints and undefined", () => ({ big: 12345678901234567890n, none: undefined, list: [undefined] })],
    ["nested arrays and objects", () => ({ deep: { list: [{ x: 1 }, [2, [3]]] } })],
    ["a shared object", sharedPair],
    ["a cycle", circular],
    ["a prototype-less object", () => Object.assign(Object.create(null), { a: 1 })],
  ])("an equal value built again is the same: %s", (_name, build) => {
    expect(sameAs(build(), build())).toBe(true);
  });

  test.each<[string, unknown, unknown]>([
    ["0 and -0", { n: 0 }, { n: -0 }],
    ["-0 and 0", [-0], [0]],
    ["NaN and Infinity", [Number.NaN], [Number.POSITIVE_INFINITY]],
    ["Infinity and -Infinity", [Number.POSITIVE_INFINITY], [Number.NEGATIVE_INFINITY]],
    ["a bigint changed", [1n], [2n]],
    ["a bigint and the number it equals", [1n], [1]],
    ["a string and the number it spells", ["1"], [1]],
    ["null and undefined", [null], [undefined]],
    ["a key added holding undefined", { a: 1 }, { a: 1, b: undefined }],
    ["keys in another order", { a: 1, b: 1 }, { b: 1, a: 1 }],
    ["a key renamed", { a: 1 }, { b: 1 }],
    ["an array and an object with its indices", [1], { 0: 1 }],
    ["an array grown by a hole", [1], [1, undefined]],
    ["an ISO string and its Date", { at: "1970-01-01T00:00:00.042Z" }, { at: new Date(42) }],
    ["an equal Map", new Map([[1, "one"]]), new Map([[1, "one"]])],
    ["a shared object and two equal ones", sharedPair(), { a: { v: 1 }, b: { v: 1 } }],
    ["two equal objects and one shared", { a: { v: 1 }, b: { v: 1 } }, sharedPair()],
    ["one shared object moved to where another was", pairOfPairs([0, 0, 1, 1]), pairOfPairs([0, 0, 1, 0])],
    ["a cycle and its unrolled copy", circular(), { name: "loop", self: { name: "loop", self: null } }],
    ["an Error and a plain object like it", { e: { name: "Error", message: "m" } }, { e: new Error("m") }],
    ["a function where undefined was", [undefined], [() => 1]],
  ])("a change is seen: %s", (_name, before, after) => {
    expect(sameAs(before, after)).toBe(false);
  });

  test("a host object is never the same, even where it was before", () => {
    const host = { id: 1 };
    const snapshot = codec.encodeFields({ memo: [host] }, ["memo"], {
      onRefused: () => {},
      knownHandle: (value) =>
        value === host ? { id: 1, kind: "object", methods: [], properties: [] } : undefined,
    });
    const root = snapshot.nodes[0] as unknown[];
    expect(
      codec.sameWireValue([host], snapshot.nodes, root[2] as number, (value) => value === host, false),
    ).toBe(false);
  });

  test("reads each getter once, and a getter that throws answers changed", () => {
    let reads = 0;
    const value = {
      get counted() {
        reads++;
        return 1;
      },
    };
    expect(sameAs({ counted: 1 }, value)).toBe(true);
    expect(reads).toBe(1);
    const throwing = {
      get broken(): number {
        throw new Error("no");
      },
    };
    expect(sameAs({ broken: 1 }, throwing)).toBe(false);
  });
});
