import { expect, test } from "vitest";
import {
  answerInOrder,
  type BatchedCall,
  batchedCallOf,
  callMembrane,
  checkBatch,
  type HostCall,
  type HostMembrane,
  type HostOutcome,
  hostCallOf,
} from "../../engine/membrane/index.ts";

/*
 * A host call is one `HostCall` record on the host; the isolate's bridge and a sandbox process's call pipe carry the
 * same fields positionally. The conversions at those edges keep every field, so a batch crosses the pipe as the very
 * text the isolate wrote.
 */

const batch: BatchedCall[] = [
  ["call", 3, "record", '["a"]', 5 * 65536 + 7, '{"clock":[1],"random":[]}'],
  ["get", 4, "name", "[]", 0, ""],
  ["call", 5, null, "[]", -1, ""],
];

test("a batch checked into records converts back to the same tuples and the same JSON text", () => {
  const text = JSON.stringify(batch);
  const calls = checkBatch(JSON.parse(text));
  expect(calls[0]).toEqual({
    operation: "call",
    handle: 3,
    member: "record",
    args: '["a"]',
    line: 5 * 65536 + 7,
    nondeterminism: '{"clock":[1],"random":[]}',
  });
  expect(JSON.stringify(calls.map(batchedCallOf))).toBe(text);
  expect(batch.map((call) => batchedCallOf(hostCallOf(call)))).toEqual(batch);
});

test("a batch of another shape is refused", () => {
  expect(() => checkBatch([["call", 1, null, "[]", 0]])).toThrow(TypeError);
  expect(() => checkBatch([["call", "1", null, "[]", 0, ""]])).toThrow(TypeError);
  expect(() => checkBatch({})).toThrow(TypeError);
});

test("callMembrane dispatches a record by its operation, passing a plain call site and the values read first", () => {
  const seen: string[] = [];
  const value = (text: string): HostOutcome => ({ kind: "value", wire: text });
  const membrane: HostMembrane = {
    call: (handle, member, args, line) => value(`call ${handle} ${member} ${args} ${line}`),
    construct: (handle, args, line) => value(`construct ${handle} ${args} ${line}`),
    get: (handle, property, line) => value(`get ${handle} ${property} ${line}`),
    readValues: (nondeterminism) => seen.push(nondeterminism),
  };
  const call = (fields: Partial<HostCall>): HostOutcome =>
    callMembrane(membrane, { operation: "call", handle: 1, member: "m", args: "[]", line: 9, ...fields });
  expect(call({})).toEqual(value("call 1 m [] 9"));
  expect(call({ operation: "construct", line: 1.5 })).toEqual(value("construct 1 [] 0"));
  expect(call({ operation: "get", member: null, line: -2 })).toEqual(value("get 1  -2"));
  expect(call({ nondeterminism: '{"clock":[2]}' })).toEqual(value("call 1 m [] 9"));
  expect(seen).toEqual(['{"clock":[2]}']);
  expect(call({ operation: "ask" }).kind).toBe("error");
});

test("answerInOrder stops after a call that ends the run's calls", () => {
  const calls = checkBatch(batch);
  const outcomes: HostOutcome[] = [
    { kind: "value", wire: "1" },
    { kind: "pause" },
    { kind: "value", wire: "3" },
  ];
  let index = 0;
  expect(answerInOrder(calls, () => outcomes[index++]!)).toEqual(outcomes.slice(0, 2));
});
