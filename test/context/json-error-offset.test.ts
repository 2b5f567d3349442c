import { describe, expect, it } from "vitest";
import { jsonErrorOffset } from "../../engine/context/json-error-offset.ts";

const INVALID = [
  '{"a":1,}',
  '{"a":1',
  '{"a":1} x',
  '{\n  "a": 1\n  "b": 2}',
  '{"a":"x\ny"}',
  "[1,2",
  '{"a":01}',
  '"\\x"',
  '"\\u12g4"',
  "[1,]",
  '{"a" 1}',
  "{,}",
  "-",
  "1.",
  '{"a":[true,false,nul]}',
];

describe("jsonErrorOffset", () => {
  it("agrees with V8 wherever V8 reports a position", () => {
    let compared = 0;
    for (const text of INVALID) {
      let message = "";
      try {
        JSON.parse(text);
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message, text).not.toBe("");
      const position = /at position (\d+)/.exec(message)?.[1];
      if (position === undefined) continue;
      compared++;
      expect(jsonErrorOffset(text), text).toBe(Number(position));
    }
    expect(compared).toBeGreaterThan(5);
  });

  it("locates errors V8 reports without a position", () => {
    expect(jsonErrorOffset('{"a": }')).toBe(6);
    expect(jsonErrorOffset('{"a": tru}')).toBe(6);
    expect(jsonErrorOffset("xyz")).toBe(0);
    expect(jsonErrorOffset("")).toBe(0);
  });

  it("returns undefined for valid JSON", () => {
    for (const text of [
      '{"a":[1,-2.5e3,{"b":"\\u00e9\\n"}],"c":null,"d":true,"e":false}',
      " [ ] ",
      '"x"',
      "0",
      "{}",
    ]) {
      expect(() => JSON.parse(text)).not.toThrow();
      expect(jsonErrorOffset(text), text).toBeUndefined();
    }
  });
});
