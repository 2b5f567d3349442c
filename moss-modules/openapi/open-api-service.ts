import { currentRunSignal } from "../../engine/runtime/run-signal.ts";
import { SecretRedactor } from "../redact-secrets.ts";
import type { ApiModel, ApiOperation, ApiParameter } from "./api-model.ts";
import { Authenticator, type Credential, type Secret } from "./auth.ts";
import { HttpError } from "./errors.ts";
import type { PluginAuth } from "./plugin-manifest.ts";

/** How the host calls the API. Every limit has a default; credentials never reach model code. */
export interface OpenApiServiceOptions {
  /** Base URL overriding `servers[0].url` (its origin is the only one reachable). */
  serverUrl?: string;
  /** Values of `servers[0].variables` (else each variable's default). */
  serverVariables?: Record<string, string>;
  /** Credentials by security-scheme name or `plugin.json` auth argument name. */
  credentials?: Record<string, Credential>;
  /** A bearer token (or a function returning one): `plugin.json` `oidc` auth and http bearer schemes. */
  token?: Secret;
  /** Per-call time limit, response body included. Default 30 000. */
  timeoutMs?: number;
  /** Largest response body read. Default 5 MiB. */
  maxResponseBytes?: number;
  /** Most characters of an error response body kept in an `HttpError`. Default 2 000. */
  maxErrorBodyChars?: number;
  /** Same-origin redirects followed. Default 5. */
  maxRedirects?: number;
}

/** A call the service makes: everything a flow step or a method needs. */
export type CallOperation = (name: string, args: unknown, runSignal?: AbortSignal) => Promise<unknown>;

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_RESPONSE_BYTES = 5 * 1024 * 1024;
const DEFAULT_MAX_ERROR_BODY_CHARS = 2_000;
const DEFAULT_MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Headers model code may not set through a header parameter: the transport and the host own them. */
const FORBIDDEN_HEADERS = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "upgrade",
  "te",
  "trailer",
  "expect",
  "cookie",
  "proxy-authorization",
]);

/** The resolved base URL of a document: `servers[0]` with its variables filled in, or the override. */
export function serverBaseUrl(
  model: ApiModel,
  options: Pick<OpenApiServiceOptions, "serverUrl" | "serverVariables">,
): URL {
  const servers = Array.isArray(model.document.servers)
    ? (model.document.servers as Array<Record<string, unknown>>)
    : [];
  const server = servers[0];
  let text = options.serverUrl;
  if (text === undefined) {
    if (!server || typeof server.url !== "string")
      throw new Error("the document declares no servers[0].url: pass serverUrl when binding it");
    const variables = (server.variables ?? {}) as Record<string, { default?: unknown; enum?: unknown[] }>;
    text = server.url.replace(/\{([^}]+)\}/g, (_, name: string) => {
      const given = options.serverVariables?.[name];
      const variable = variables[name];
      const value = given ?? (variable?.default !== undefined ? String(variable.default) : undefined);
      if (value === undefined)
        throw new Error(`server variable {${name}} has no value: pass serverVariables.${name}`);
      if (given !== undefined && Array.isArray(variable?.enum) && !variable.enum.map(String).includes(given))
        throw new Error(`server variable {${name}} must be one of ${variable.enum.join(", ")}`);
      return value;
    });
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`server URL ${JSON.stringify(text)} is not an absolute URL: pass serverUrl when binding`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new Error(`server URL must be http or https, got ${url.protocol}`);
  if (!url.pathname.endsWith("/")) url.pathname = `${url.pathname}/`;
  url.search = "";
  url.hash = "";
  return url;
}

/**
 * The host object behind a generated service type: one async method per operation. Methods are own properties of
 * a prototype-less object; the base URL, credentials and limits live in closures, out of model code's reach.
 */
export function createOpenApiService(
  model: ApiModel,
  options: OpenApiServiceOptions & { pluginAuth?: PluginAuth } = {},
): {
  service: Record<string, (args?: unknown) => Promise<unknown>>;
  call: CallOperation;
  secrets: SecretRedactor;
  /** Reads the credentials given as environment variables now: a missing one throws `credential-missing`. */
  checkCredentials(): void;
} {
  // A document without servers still loads and declares its operations; its calls fail until a serverUrl is bound.
  const hasServer =
    options.serverUrl !== undefined ||
    (Array.isArray(model.document.servers) && model.document.servers.length > 0);
  const base = hasServer ? serverBaseUrl(model, options) : undefined;
  const secrets = new SecretRedactor();
  const limits = {
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    maxResponseBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    maxErrorBodyChars: options.maxErrorBodyChars ?? DEFAULT_MAX_ERROR_BODY_CHARS,
    maxRedirects: options.maxRedirects ?? DEFAULT_MAX_REDIRECTS,
  };
  const authenticator = new Authenticator({
    document: model.document,
    ...(options.pluginAuth ? { pluginAuth: options.pluginAuth } : {}),
    ...(options.credentials ? { credentials: options.credentials } : {}),
    ...(options.token !== undefined ? { token: options.token } : {}),
    secrets,
    fetchToken: (url, init) =>
      fetch(url, { ...init, redirect: "error", signal: AbortSignal.timeout(limits.timeoutMs) }),
  });
  const byName = new Map(model.operations.map((operation) => [operation.name, operation]));

  // The run signal is read before the first await (a flow passes the one its own call started with): the run that
  // made this call ending aborts its request.
  const call: CallOperation = async (name, args, runSignal = currentRunSignal()) => {
    const operation = byName.get(name);
    if (!operation) throw new TypeError(`no operation named ${name}`);
    try {
      if (!base)
        throw new Error(
          `${operation.method} ${operation.path}: the document declares no server; the host must bind a serverUrl`,
        );
      return await perform(operation, args, {
        base,
        resolve: model.resolve,
        authenticator,
        secrets,
        limits,
        runSignal,
      });
    } catch (error) {
      throw scrubbed(error, secrets);
    }
  };
  const service = Object.create(null) as Record<string, (args?: unknown) => Promise<unknown>>;
  for (const operation of model.operations) {
    Object.defineProperty(service, operation.name, {
      value: (args?: unknown) => call(operation.name, args),
      enumerable: true,
    });
  }
  return { service, call, secrets, checkCredentials: () => authenticator.checkCredentials() };
}

interface CallContext {
  base: URL;
  resolve: (ref: string) => unknown;
  authenticator: Authenticator;
  secrets: SecretRedactor;
  runSignal: AbortSignal | undefined;
  limits: { timeoutMs: number; maxResponseBytes: number; maxErrorBodyChars: number; maxRedirects: number };
}

async function perform(operation: ApiOperation, rawArgs: unknown, context: CallContext): Promise<unknown> {
  const label = `${operation.method} ${operation.path}`;
  const args = checkArguments(operation, rawArgs);
  const headers = new Headers();
  const query = new URLSearchParams();
  const cookies = new Map<string, string>();
  let route = operation.path;
  for (const parameter of operation.parameters) {
    const value = args[parameter.key];
    if (value === undefined || value === null) continue;
    switch (parameter.in) {
      case "path":
        route = route.split(`{${parameter.name}}`).join(pathSegment(parameter, value));
        break;
      case "query":
        appendQuery(query, parameter, value, context.resolve);
        break;
      case "header": {
        const name = parameter.name.toLowerCase();
        if (FORBIDDEN_HEADERS.has(name))
          throw new TypeError(`header ${parameter.name} cannot be set by a call`);
        headers.set(name, headerValue(parameter, value));
        break;
      }
      case "cookie":
        cookies.set(parameter.name, encodeURIComponent(scalarText(parameter, value)));
        break;
    }
  }
  const target = { headers: new Headers(), query: new URLSearchParams(), cookies: new Map<string, string>() };
  await context.authenticator.apply(operation, target);
  for (const [name, value] of target.headers) headers.set(name, value);
  for (const [name, value] of target.query) query.set(name, value);
  for (const [name, value] of target.cookies) cookies.set(name, encodeURIComponent(value));
  if (cookies.size > 0)
    headers.set("cookie", [...cookies].map(([name, value]) => `${name}=${value}`).join("; "));
  headers.set("accept", operation.response?.mediaType ?? "application/json, */*;q=0.5");

  const url = new URL(route.replace(/^\//, ""), context.base);
  if (url.origin !== context.base.origin || !url.pathname.startsWith(context.base.pathname))
    throw new TypeError(`${label}: the path leaves the API's base URL`);
  for (const [name, value] of query) url.searchParams.append(name, value);

  let body: RequestInit["body"] | undefined;
  if (operation.body && args[operation.body.key] !== undefined) {
    const encoded = encodeBody(
      operation.body.mediaType,
      args[operation.body.key],
      binaryProperties(operation.body.schema, context.resolve),
    );
    body = encoded.body;
    if (encoded.contentType) headers.set("content-type", encoded.contentType);
  }

  // The call's own time limit, and the end of the run that made it: nobody awaits the answer after that.
  const timeout = AbortSignal.timeout(context.limits.timeoutMs);
  const signal = context.runSignal ? AbortSignal.any([timeout, context.runSignal]) : timeout;
  let method = operation.method;
  let current = url;
  for (let redirects = 0; ; redirects++) {
    let response: Response;
    try {
      response = await fetch(current, { method, headers, body: body ?? null, redirect: "manual", signal });
    } catch (error) {
      throw transportError(error, label, context.limits.timeoutMs);
    }
    if (REDIRECT_STATUSES.has(response.status) && response.headers.has("location")) {
      await response.body?.cancel();
      const next = new URL(response.headers.get("location")!, current);
      if (next.origin !== context.base.origin)
        throw new Error(
          `${label}: the server redirected to another origin; only ${context.base.origin} is reachable`,
        );
      if (redirects >= context.limits.maxRedirects)
        throw new Error(`${label}: more than ${context.limits.maxRedirects} redirects`);
      if (
        response.status === 303 ||
        ((response.status === 301 || response.status === 302) && method === "POST")
      ) {
        method = "GET";
        body = undefined;
        headers.delete("content-type");
      }
      current = next;
      continue;
    }
    const bytes = await readBounded(
      response,
      context.limits.maxResponseBytes,
      label,
      context.limits.timeoutMs,
    );
    const parsed = parseBody(bytes, response.headers.get("content-type"), context.secrets);
    if (response.status >= 200 && response.status < 300) return response.status === 204 ? undefined : parsed;
    throw new HttpError(
      response.status,
      response.statusText,
      boundedBody(parsed, context.limits.maxErrorBodyChars),
      label,
    );
  }
}

function checkArguments(operation: ApiOperation, raw: unknown): Record<string, unknown> {
  if (raw === undefined || raw === null) raw = {};
  if (typeof raw !== "object" || Array.isArray(raw))
    throw new TypeError(`${operation.name}: pass one object of arguments`);
  const args = raw as Record<string, unknown>;
  const known = new Set([
    ...operation.parameters.map((parameter) => parameter.key),
    ...(operation.body ? [operation.body.key] : []),
  ]);
  for (const key of Object.keys(args)) {
    if (!known.has(key))
      throw new TypeError(
        `${operation.name}: unknown argument ${JSON.stringify(key)} (arguments: ${[...known].join(", ") || "none"})`,
      );
  }
  for (const parameter of operation.parameters) {
    if (parameter.required && (args[parameter.key] === undefined || args[parameter.key] === null))
      throw new TypeError(`${operation.name}: missing required argument ${parameter.key}`);
  }
  if (operation.body?.required && args[operation.body.key] === undefined)
    throw new TypeError(`${operation.name}: missing required argument ${operation.body.key}`);
  return args;
}

function scalarText(parameter: ApiParameter, value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint")
    return String(value);
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map((item) => scalarText(parameter, item)).join(",");
  throw new TypeError(`argument ${parameter.key} must be a string, number or boolean`);
}

function pathSegment(parameter: ApiParameter, value: unknown): string {
  const text = scalarText(parameter, value);
  // "." and ".." (also percent-encoded) are dot segments to a URL parser: they would climb out of the route.
  if (text === "" || /^(?:\.|%2e){1,2}$/i.test(text))
    throw new TypeError(`argument ${parameter.key} must not be empty, "." or ".."`);
  return encodeURIComponent(text);
}

function appendQuery(
  query: URLSearchParams,
  parameter: ApiParameter,
  value: unknown,
  resolve: (ref: string) => unknown,
): void {
  if (Array.isArray(value) && parameter.explode) {
    for (const item of value) query.append(parameter.name, scalarText(parameter, item));
  } else if (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof Date)
  ) {
    // An exploded object spreads its keys into the query: only the keys its schema declares, never others.
    const allowed = objectKeys(parameter.schema, resolve);
    if (!allowed) throw new TypeError(`argument ${parameter.key} must be a string, number or boolean`);
    const entries = Object.entries(value).filter(([, item]) => item !== undefined);
    for (const [key] of entries) {
      if (allowed !== "any" && !allowed.has(key))
        throw new TypeError(`argument ${parameter.key} has no field ${JSON.stringify(key)}`);
      if (allowed === "any" && parameter.explode)
        throw new TypeError(`argument ${parameter.key} declares no fields to send`);
    }
    if (parameter.explode) for (const [key, item] of entries) query.append(key, scalarText(parameter, item));
    else
      query.append(
        parameter.name,
        entries.map(([key, item]) => `${key},${scalarText(parameter, item)}`).join(","),
      );
  } else query.append(parameter.name, scalarText(parameter, value));
}

/** The property names of an object schema, `"any"` for an object without declared properties, else undefined. */
function objectKeys(schema: unknown, resolve: (ref: string) => unknown): Set<string> | "any" | undefined {
  let node = schema as Record<string, unknown> | undefined;
  for (let hops = 0; hops < 10 && typeof node?.$ref === "string"; hops++)
    node = resolve(node.$ref) as typeof node;
  if (!node || (node.type !== "object" && node.properties === undefined)) return undefined;
  const properties = node.properties as Record<string, unknown> | undefined;
  return properties ? new Set(Object.keys(properties)) : "any";
}

function headerValue(parameter: ApiParameter, value: unknown): string {
  const text = scalarText(parameter, value);
  if (/[\r\n\0]/.test(text))
    throw new TypeError(`header ${parameter.name} must not contain line breaks or NUL`);
  return text;
}

/** Names of the top-level properties of a multipart schema that are files (`format: binary`). */
function binaryProperties(schema: unknown, resolve: (ref: string) => unknown): Set<string> {
  const names = new Set<string>();
  const visit = (node: unknown, depth: number): void => {
    if (depth > 8 || typeof node !== "object" || node === null) return;
    const record = node as Record<string, unknown>;
    if (typeof record.$ref === "string") {
      visit(resolve(record.$ref), depth + 1);
      return;
    }
    for (const part of Array.isArray(record.allOf) ? record.allOf : []) visit(part, depth + 1);
    const properties = record.properties as Record<string, Record<string, unknown>> | undefined;
    for (const [name, property] of Object.entries(properties ?? {})) {
      const item =
        property?.type === "array" ? (property.items as Record<string, unknown> | undefined) : property;
      if (item?.format === "binary" || item?.contentMediaType !== undefined) names.add(name);
    }
  };
  visit(schema, 0);
  return names;
}

function encodeBody(
  mediaType: string,
  value: unknown,
  files: ReadonlySet<string>,
): { body: RequestInit["body"]; contentType?: string } {
  const base = mediaType.split(";")[0]!.trim().toLowerCase();
  if (base === "application/x-www-form-urlencoded") {
    const form = new URLSearchParams();
    for (const [key, item] of Object.entries(asObject(value, "form body"))) {
      for (const part of Array.isArray(item) ? item : [item])
        if (part !== undefined) form.append(key, formText(part));
    }
    return { body: form, contentType: "application/x-www-form-urlencoded" };
  }
  if (base === "multipart/form-data") {
    const form = new FormData();
    for (const [key, item] of Object.entries(asObject(value, "multipart body"))) {
      for (const part of Array.isArray(item) ? item : [item]) {
        if (part === undefined) continue;
        if (part instanceof Uint8Array || (files.has(key) && typeof part === "string"))
          form.append(key, new Blob([part]), key);
        else if (typeof part === "object" && part !== null && !(part instanceof Date))
          form.append(key, new Blob([JSON.stringify(part)], { type: "application/json" }), `${key}.json`);
        else form.append(key, formText(part));
      }
    }
    return { body: form };
  }
  if (/json/.test(base)) return { body: JSON.stringify(value), contentType: mediaType };
  if (value instanceof Uint8Array) return { body: value, contentType: mediaType };
  if (typeof value === "string") return { body: value, contentType: mediaType };
  return { body: JSON.stringify(value), contentType: mediaType };
}

function formText(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  if (typeof value === "object" && value !== null) return JSON.stringify(value);
  return String(value);
}

function asObject(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new TypeError(`the ${what} must be an object`);
  return value as Record<string, unknown>;
}

async function readBounded(
  response: Response,
  maxBytes: number,
  label: string,
  timeoutMs: number,
): Promise<Uint8Array> {
  const declared = Number(response.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel();
    throw new RangeError(
      `${label}: the response (${declared} bytes) is larger than the limit of ${maxBytes} bytes`,
    );
  }
  if (!response.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel();
        throw new RangeError(`${label}: the response is larger than the limit of ${maxBytes} bytes`);
      }
      chunks.push(value);
    }
  } catch (error) {
    if (error instanceof RangeError) throw error;
    throw transportError(error, label, timeoutMs);
  }
  return Buffer.concat(chunks);
}

/** The body as model code receives it, free of secrets in every content type (a server may echo a credential). */
function parseBody(bytes: Uint8Array, contentType: string | null, secrets: SecretRedactor): unknown {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  const textual = type === "" || /json|^text\/|xml|x-www-form-urlencoded/.test(type);
  if (!textual) return secrets.redactBytes(bytes);
  const text = Buffer.from(bytes).toString("utf8");
  if (/json/.test(type) || (type === "" && /^\s*[[{"]/.test(text))) {
    try {
      // Parsed first, then redacted: the values model code reads are what must be free of secrets.
      return text === "" ? undefined : secrets.redactValue(JSON.parse(text));
    } catch {
      return secrets.redactText(text);
    }
  }
  return secrets.redactText(text);
}

function boundedBody(body: unknown, maxChars: number): unknown {
  if (body instanceof Uint8Array) return `<${body.byteLength} bytes>`;
  const text = typeof body === "string" ? body : JSON.stringify(body);
  if (text === undefined || text.length <= maxChars) return body;
  return `${text.slice(0, maxChars)}… [${text.length - maxChars} more characters]`;
}

function transportError(error: unknown, label: string, timeoutMs: number): Error {
  const name = (error as { name?: unknown })?.name;
  if (name === "TimeoutError" || name === "AbortError")
    return new Error(`${label} timed out after ${timeoutMs} ms`);
  const cause = (error as { cause?: { code?: unknown } })?.cause?.code;
  return new Error(`${label} failed: ${typeof cause === "string" ? cause : "network error"}`);
}

/** The same error with every known secret removed from its message and fields. */
function scrubbed(error: unknown, secrets: SecretRedactor): unknown {
  if (error instanceof Error) return secrets.redactError(error);
  return new Error(secrets.redactText(String(error)));
}
