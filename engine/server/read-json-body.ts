import type { Context } from "hono";
import { ServerError } from "./server-error.ts";

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
    const { done, value } = await reader.read();
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
  return value as Record<string, unknown>;
}

function tooLarge(maxBytes: number): ServerError {
  return new ServerError(
    413,
    "body-too-large",
    `The request body is over this tenant's limit of ${maxBytes} bytes.`,
  );
}
