// The one encoding at the store's edge (issue 23 §2): what PostgreSQL cannot hold in `text` or `jsonb` (NUL, lone
// surrogates) is escaped, and every string comes back exactly; the store's own round trips are in attacks-once.test.ts.
import { describe, expect, it } from "vitest";
import {
  readStoredJson,
  readStoredText,
  storedJson,
  storedText,
} from "../../engine/server/store/stored-text.ts";

const TEXTS = [
  "",
  "plain text, ünïcödé, 😀",
  "a\u0000b",
  "\ud800",
  "x\udc00y",
  "\udc00\ud800",
  "\uE000",
  "\uE0000041",
  "\uE000zzzz",
  "paired \ud83d\ude00 and lone \ud83d",
];

describe("storedText", () => {
  it("leaves text PostgreSQL holds as it is", () => {
    expect(storedText("plain text, ünïcödé, 😀")).toBe("plain text, ünïcödé, 😀");
  });

  it.each(TEXTS)("round-trips %j exactly, with no NUL and no lone surrogate in the stored form", (text) => {
    const stored = storedText(text);
    expect(stored).not.toMatch(
      /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/,
    );
    expect(Buffer.from(stored, "utf8").toString("utf8")).toBe(stored);
    expect(readStoredText(stored)).toBe(text);
  });
});

describe("storedJson", () => {
  it("round-trips every string of a value, keys included", () => {
    const value = { "k\u0000": ["a\ud800", { nested: "\uE000", n: 1, b: true, z: null }], plain: "ok" };
    const stored = storedJson(value);
    expect(stored).not.toContain("\\u0000");
    expect(stored).not.toMatch(/\\ud8/);
    expect(readStoredJson(JSON.parse(stored))).toEqual(value);
  });
});
