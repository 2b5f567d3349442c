// The checks of a request's path, query and body fields shared by the resources of the native API: each answers
// 400 with a stable code naming what is wrong.
import { ServerError } from "../server-error.ts";

/** What every route of the native API sees: the tenant its bearer token names. */
export type ApiEnv = { Variables: { tenant: string } };

const THREAD_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

/** A thread id as the API takes it, or 400 `thread-id-invalid`. */
export function threadId(id: string): string {
  if (!THREAD_ID.test(id)) {
    throw new ServerError(
      400,
      "thread-id-invalid",
      `A thread id is 1 to 128 letters, digits, _ . : or - (starting with a letter or digit), got "${id.slice(0, 140)}".`,
    );
  }
  return id;
}

/** The body's optional field `name` (a string or an object), or 400 `<name>-invalid`. */
export function optionalField(
  body: Record<string, unknown>,
  name: string,
  type: "string" | "object",
): unknown {
  const value = body[name];
  if (value === undefined) return undefined;
  const fits =
    type === "object"
      ? typeof value === "object" && value !== null && !Array.isArray(value)
      : typeof value === type;
  if (!fits)
    throw new ServerError(
      400,
      `${name}-invalid`,
      `"${name}" must be ${type === "object" ? "an object" : "a string"}.`,
    );
  return value;
}

/** The integer query parameter `name` within `min`..`max` (`fallback` when absent), or 400 `query-invalid`. */
export function integerQuery(
  text: string | undefined,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ServerError(
      400,
      "query-invalid",
      `?${name} must be an integer from ${min} to ${max}, got "${text}".`,
    );
  }
  return value;
}
