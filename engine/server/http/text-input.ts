import type { Context, Next } from "hono";
import { ServerError } from "../server-error.ts";

/**
 * Text the server takes from a request and may store: no NUL byte (PostgreSQL's text and JSON cannot hold one) and
 * no lone surrogate (half of a UTF-16 pair: it has no UTF-8 form). The one check of it, at the request's edge: every
 * JSON body (`readJson`), every path segment and every query parameter (`checkRequestText`), for every route; a
 * refusal is 400 `text-invalid` naming the field, before anything is stored.
 */

/** Where `text` breaks the rule (a NUL byte, a lone surrogate) and how, or undefined when it holds none. */
export function textProblem(text: string): string | undefined {
  // The common case in one pass each: no NUL and no surrogate at all.
  if (!text.includes("\u0000") && !/[\ud800-\udfff]/.test(text)) return undefined;
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index);
    if (unit === 0) return `a NUL byte (U+0000) at character ${index}`;
    if (unit < 0xd800 || unit > 0xdfff) continue;
    const next = text.charCodeAt(index + 1);
    if (unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      index++;
      continue;
    }
    return `a lone surrogate (U+${unit.toString(16).toUpperCase()}) at character ${index}`;
  }
  return undefined;
}

/** Throws 400 `text-invalid` naming `field` when `text` breaks the rule. */
export function checkText(text: string, field: string): void {
  const problem = textProblem(text);
  if (problem !== undefined) {
    throw new ServerError(
      400,
      "text-invalid",
      `${field} holds ${problem}, which the server cannot store: send text without NUL bytes or unpaired surrogates. Nothing was stored.`,
    );
  }
}

/** Checks every string of a parsed JSON value, keys too, naming each by its path from `field` (`metadata.title`). */
export function checkJsonText(value: unknown, field: string): void {
  if (typeof value === "string") {
    checkText(value, field || "the body");
    return;
  }
  if (value === null || typeof value !== "object") return;
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) checkJsonText(item, `${field}[${index}]`);
    return;
  }
  for (const [key, item] of Object.entries(value)) {
    const path = /^[A-Za-z_$][\w$]*$/.test(key)
      ? field === ""
        ? key
        : `${field}.${key}`
      : `${field}[${JSON.stringify(key)}]`;
    checkText(key, `the key ${path}`);
    checkJsonText(item, path);
  }
}

/**
 * Middleware: every path segment (named by its route parameter, `threadId`, `runId`) and every query parameter
 * (`?before`) of the request holds text the server can store; a segment that is not percent-encoded UTF-8 is
 * refused too (a lone surrogate sent in a path can only be that).
 */
export async function checkRequestText(c: Context, next: Next): Promise<void> {
  const url = new URL(c.req.url);
  const route = c.req.matchedRoutes.findLast((matched) => matched.method !== "ALL")?.path.split("/");
  for (const [index, raw] of url.pathname.split("/").entries()) {
    const name = route?.[index]?.startsWith(":") ? route[index].slice(1) : `path segment ${index}`;
    checkText(decoded(raw, name), name);
  }
  // Read from the raw query, not URLSearchParams: that one turns a malformed escape into U+FFFD silently.
  for (const pair of url.search.slice(1).split("&")) {
    if (pair === "") continue;
    const equals = pair.indexOf("=");
    const name = decoded(equals < 0 ? pair : pair.slice(0, equals), "a query parameter's name", true);
    checkText(name, "a query parameter's name");
    if (equals >= 0) checkText(decoded(pair.slice(equals + 1), `?${name}`, true), `?${name}`);
  }
  await next();
}

/** A percent-encoded part of a URL as text; 400 `text-invalid` naming `field` when it is not UTF-8. */
function decoded(raw: string, field: string, query = false): string {
  try {
    return decodeURIComponent(query ? raw.replaceAll("+", " ") : raw);
  } catch {
    throw new ServerError(
      400,
      "text-invalid",
      `${field} ("${raw.slice(0, 140)}") is not percent-encoded UTF-8, which the server cannot store. Nothing was stored.`,
    );
  }
}
