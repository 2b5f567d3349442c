// What PostgreSQL cannot hold in `text` and `jsonb` (a NUL character; a lone UTF-16 surrogate, which has no UTF-8
// form) is written as ESCAPE and the code unit's four hex digits, and so is ESCAPE itself: every other text is
// stored as it is, and what is read back is decoded to the exact string that was written.
const ESCAPE = "\uE000";
const UNSTORABLE = /[\u0000\uE000]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const ESCAPED = /\uE000([0-9a-f]{4})/g;
const MAY_NEED = /[\u0000\uE000\uD800-\uDFFF]/;

/** The form of `text` a `text` or `jsonb` value of PostgreSQL (and PGlite) holds exactly (see {@link readStoredText}). */
export function storedText(text: string): string {
  if (!MAY_NEED.test(text)) return text;
  return text.replace(UNSTORABLE, (unit) => `${ESCAPE}${unit.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** The text {@link storedText} was given. */
export function readStoredText(stored: string): string {
  if (!stored.includes(ESCAPE)) return stored;
  return stored.replace(ESCAPED, (_match, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

/** JSON text of `value` for a `jsonb` column: every string in it (keys too) in its {@link storedText} form. */
export function storedJson(value: unknown): string {
  const text = JSON.stringify(value);
  return MAY_NEED.test(text) || text.includes("\\u")
    ? JSON.stringify(mapStrings(JSON.parse(text), storedText))
    : text;
}

/** A value read from a `jsonb` column written by {@link storedJson}, with its strings as they were given. */
export function readStoredJson<T>(value: T): T {
  return mapStrings(value, readStoredText) as T;
}

/** `value` (plain JSON data) with `map` applied to every string in it, keys included. */
function mapStrings(value: unknown, map: (text: string) => string): unknown {
  if (typeof value === "string") return map(value);
  if (Array.isArray(value)) return value.map((item) => mapStrings(item, map));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([key, inner]) => [map(key), mapStrings(inner, map)]),
    );
  }
  return value;
}
