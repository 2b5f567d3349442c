import type { Context } from "hono";
import { ServerError } from "../server-error.ts";
import { checkJsonText } from "./text-input.ts";

/** Levels of nested objects and arrays a body may have: deeper ones overflow the stack where they are stored. */
const MAX_JSON_DEPTH = 64;

/** Reads a JSON object body: 413 over `maxBytes`, 400 naming the cause when it is not JSON or not an object. */
export async function readJson(
  c: Context,
  maxBytes: number,
  emptyAllowed: boolean,
): Promise<Record<string, unknown>> {
  const declared = Number(c.req.header("content-length") ?? Number.NaN);
  if (declared > maxBytes) throw tooLarge(maxBytes);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = c.req.raw.body?.getReader();
  while (reader !== undefined) {
    let chunk: Awaited<ReturnType<typeof reader.read>>;
    try {
      chunk = await reader.read();
    } catch {
      // The client stopped sending (it left, or the server's request timeout closed it): not a server failure.
      throw new ServerError(
        400,
        "body-incomplete",
        "The request body ended before all of it arrived (the client stopped sending it, or took longer than the server's request timeout).",
      );
    }
    const { done, value } = chunk;
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") {
    if (emptyAllowed) return {};
    throw new ServerError(400, "json-invalid", "The request body is empty; it must be a JSON object.");
  }
  const depth = nestingDepth(text, MAX_JSON_DEPTH);
  if (depth > MAX_JSON_DEPTH) {
    throw new ServerError(
      400,
      "json-invalid",
      `The request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep.`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ServerError(
      400,
      "json-invalid",
      `The request body is not valid JSON: ${(error as Error).message}.`,
    );
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ServerError(400, "json-invalid", "The request body must be a JSON object.");
  }
  // Every text of every body, before any route reads it: no NUL byte, no lone surrogate.
  checkJsonText(value, "");
  return value as Record<string, unknown>;
}

function tooLarge(maxBytes: number): ServerError {
  return new ServerError(
    413,
    "body-too-large",
    `The request body is over this tenant's limit of ${maxBytes} bytes.`,
  );
}

/** The deepest nesting of `{`/`[` in JSON text (outside strings), counted up to just past `limit`. */
function nestingDepth(text: string, limit: number): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const char = text.charCodeAt(index);
    if (inString) {
      if (char === 0x5c) index++;
      else if (char === 0x22) inString = false;
    } else if (char === 0x22) inString = true;
    else if (char === 0x7b || char === 0x5b) {
      depth++;
      if (depth > deepest) deepest = depth;
      if (deepest > limit) return deepest;
    } else if (char === 0x7d || char === 0x5d) depth--;
  }
  return deepest;
}
