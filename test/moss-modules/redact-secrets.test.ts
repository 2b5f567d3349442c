import { describe, expect, test } from "vitest";
import { REDACTED, SecretRedactor } from "../../moss-modules/redact-secrets.ts";

const KEY = "sk/live+Key<&>~!'()*_0042 x";

function redactor(...secrets: string[]): SecretRedactor {
  const redactor = new SecretRedactor();
  for (const secret of secrets) redactor.add(secret);
  return redactor;
}

describe("SecretRedactor: decode, then match", () => {
  const spellings: Array<[string, string]> = [
    ["raw", KEY],
    ["JSON with escaped slashes", JSON.stringify(KEY).slice(1, -1).replace(/\//g, "\\/")],
    [
      "JSON with every character \\u-escaped (either hex case)",
      [...KEY]
        .map((character, index) => {
          const hex = character.charCodeAt(0).toString(16).padStart(4, "0");
          return `\\u${index % 2 ? hex.toUpperCase() : hex}`;
        })
        .join(""),
    ],
    [
      "percent, lower-case hex, every byte",
      [...Buffer.from(KEY)].map((byte) => `%${byte.toString(16)}`).join(""),
    ],
    ["form encoding (+ for space)", new URLSearchParams({ k: KEY }).toString()],
    ["escape()", escape(KEY)],
    ["percent-encoded twice", encodeURIComponent(encodeURIComponent(KEY))],
    ["decimal character references", [...KEY].map((character) => `&#${character.charCodeAt(0)};`).join("")],
    ["named entities escaped twice", KEY.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/&/g, "&amp;")],
    ["base64", Buffer.from(KEY).toString("base64")],
    ["base64url glued to a prefix", `tok_${Buffer.from(`xy${KEY}`).toString("base64url")}`],
    ["base64 of base64", Buffer.from(Buffer.from(KEY).toString("base64")).toString("base64")],
    ["hex", Buffer.from(KEY).toString("hex").toUpperCase()],
  ];
  test.each(spellings)("%s", (_, spelled) => {
    const prefix = spelled.startsWith("k=") ? "k=" : "";
    expect(redactor(KEY).redactText(`before ${spelled} after`)).toBe(`before ${prefix}${REDACTED} after`);
  });

  test("binary bodies: UTF-8 and UTF-16 (both byte orders, any alignment) are replaced, other bytes kept", () => {
    const secrets = redactor(KEY);
    const utf8 = Buffer.concat([Buffer.from([0, 255]), Buffer.from(KEY), Buffer.from([1])]);
    expect(Buffer.from(secrets.redactBytes(utf8))).toEqual(
      Buffer.concat([Buffer.from([0, 255]), Buffer.from(REDACTED), Buffer.from([1])]),
    );
    const wide = Buffer.concat([Buffer.from([9]), Buffer.from(`<${KEY}>`, "utf16le").swap16()]);
    const redacted = Buffer.from(secrets.redactBytes(wide));
    expect(redacted.subarray(1).swap16().toString("utf16le")).toBe(`<${REDACTED}>`);
  });

  test("parsed values: strings, keys and numbers holding a secret; other values untouched", () => {
    const secrets = redactor(KEY, "12345678");
    expect(secrets.redactValue({ [KEY]: [KEY, 12345678, 7, true, null], nested: { ok: "fine" } })).toEqual({
      [REDACTED]: [REDACTED, REDACTED, 7, true, null],
      nested: { ok: "fine" },
    });
  });

  test("ordinary text, long words, base64 and prose stay as they were", () => {
    const secrets = redactor(KEY, "hunter22");
    const text =
      "The quick brown fox: aGVsbG8gd29ybGQ= %41%42 &amp; &#65; \\u0041 internationalization 0123456789abcdef";
    expect(secrets.redactText(text)).toBe(text);
  });

  test("errors: message and data fields are redacted on a copy of the same class", () => {
    class ApiError extends Error {
      override name = "ApiError";
      body = { echoed: KEY };
    }
    const original = new ApiError(`bad key ${encodeURIComponent(KEY)}`);
    const copy = redactor(KEY).redactError(original);
    expect(copy).toBeInstanceOf(ApiError);
    expect(copy.message).toBe(`bad key ${REDACTED}`);
    expect(copy.body).toEqual({ echoed: REDACTED });
    expect(original.body.echoed).toBe(KEY);
  });
});

test("a value nested deeper than the walk goes is redacted all the same", () => {
  let deep: unknown = { leak: `x ${KEY} y` };
  for (let level = 0; level < 500; level++) deep = [deep];
  expect(JSON.stringify(redactor(KEY).redactValue(deep))).not.toContain(KEY);
  expect(JSON.stringify(redactor(KEY).redactValue(deep))).toContain(`x ${REDACTED} y`);
});
