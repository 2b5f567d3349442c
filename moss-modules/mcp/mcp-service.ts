import { setMaxListeners } from "node:events";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";
import { currentRunSignal } from "../../engine/runtime/run-signal.ts";
import { SecretRedactor } from "../redact-secrets.ts";
import type { McpMethod } from "./mcp-declaration.ts";
import { OutputValidator } from "./output-validator.ts";

/** A server started as a child process that speaks MCP on its stdin/stdout. */
export interface McpStdioServer {
  command: string;
  args?: string[];
  /**
   * The child's environment (added to a minimal safe default, not to the host's whole environment). Every value is
   * a credential: redacted from whatever the server answers. Settings that may show go in `publicEnv`.
   */
  env?: Record<string, string>;
  /** Environment variables that are not secrets (a file path, a log level): passed to the child, never redacted. */
  publicEnv?: Record<string, string>;
  cwd?: string;
}

/** A server reached over streamable HTTP; `headers` (e.g. authorization) stay on the host and are redacted. */
export interface McpHttpServer {
  url: string;
  headers?: Record<string, string>;
}

/** Where the MCP server is. */
export type McpServer = McpStdioServer | McpHttpServer;

/** Limits of calls to an MCP server. */
export interface McpCallOptions {
  /** Per tool call, for connecting, and for reading the whole tool list. Default 30 000. */
  timeoutMs?: number;
  /** Most characters of a tool's error text kept in the error message. Default 2 000. */
  maxErrorChars?: number;
  /** Largest answer read from the server (one HTTP response, one stdio message). Default 5 MiB. */
  maxResponseBytes?: number;
  /** Time limit of validating one result against its tool's `outputSchema` (off the host's thread). Default 2 000. */
  validationTimeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_ERROR_CHARS = 2_000;
const DEFAULT_MAX_RESPONSE_BYTES = 5 * 1024 * 1024;
const DEFAULT_VALIDATION_TIMEOUT_MS = 2_000;
/** Most pages of `tools/list` read: a server that never stops paging fails the bind. */
export const MAX_TOOL_PAGES = 100;
/** Most tools read from one server. */
export const MAX_TOOLS = 10_000;

/** An error a tool reported (`isError`), as model code sees it. */
export class McpToolError extends Error {
  override name = "McpToolError";
}

/** A connected MCP client with the server's tool list and what it says about itself. */
export interface McpConnection {
  /** The client of the current connection (replaced when a broken connection is reopened). */
  client: Client;
  /** The connected client: the current one, or a new connection when the last one closed (a stdio child that ended, an oversized answer). */
  connected(): Promise<Client>;
  tools: Tool[];
  server: { name?: string; version?: string; instructions?: string };
  secrets: SecretRedactor;
  label: string;
  /** Why `client`'s connection broke, when the host broke it (an answer past `maxResponseBytes`). */
  failureOf(client: Client): Error | undefined;
  /** Ends the connection for good. */
  close(): Promise<void>;
}

/** Connects, reads the tool list (all pages) and returns the connection; a failure names the server. */
export async function connectMcp(server: McpServer, options: McpCallOptions = {}): Promise<McpConnection> {
  const timeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const secrets = new SecretRedactor();
  const label =
    "url" in server ? `MCP server ${redactedUrl(server.url)}` : `MCP server \`${server.command}\``;
  let url: URL | undefined;
  if ("url" in server) {
    for (const value of Object.values(server.headers ?? {})) {
      secrets.add(value);
      // "Bearer <token>", "Basic <credentials>": the credential alone is a secret too.
      const credential = /^\S+\s+(\S{8,})$/.exec(value.trim())?.[1];
      if (credential) {
        secrets.add(credential);
        const decoded = Buffer.from(credential, "base64").toString("utf8");
        // Basic auth's `user:pass`, and the password alone.
        if (/^[^:\s]+:\S+$/.test(decoded) && Buffer.from(decoded).toString("base64") === credential) {
          secrets.add(decoded);
          secrets.add(decoded.slice(decoded.indexOf(":") + 1));
        }
      }
    }
    try {
      url = new URL(server.url);
    } catch {
      throw new Error(`${label}: not an absolute URL`);
    }
    // A key in the URL (`?api_key=…`, `user:password@`) is a credential too.
    for (const value of url.searchParams.values()) secrets.add(value);
    if (url.password) secrets.add(decodeURIComponent(url.password));
  } else {
    for (const value of Object.values(server.env ?? {})) secrets.add(value);
  }
  const failures = new WeakMap<Client, Error>();
  const oversized = () =>
    new RangeError(`${label}: an answer is larger than the limit of ${maxResponseBytes} bytes`);
  const open = async (): Promise<Client> => {
    // An oversized answer breaks the connection: every call waiting on it fails now, the next call reconnects.
    const breakWith = (error: Error): void => {
      if (failures.has(client)) return;
      failures.set(client, error);
      void client.close().catch(() => {});
    };
    const transport =
      "url" in server
        ? new StreamableHTTPClientTransport(url!, {
            requestInit: { headers: { ...server.headers } },
            fetch: boundedFetch(maxResponseBytes, () => {
              const error = oversized();
              breakWith(error);
              return error;
            }),
          })
        : new StdioClientTransport({
            command: server.command,
            args: server.args ?? [],
            env: { ...defaultEnvironment(), ...server.publicEnv, ...server.env },
            ...(server.cwd ? { cwd: server.cwd } : {}),
            stderr: "ignore",
            maxBufferSize: maxResponseBytes,
          } as ConstructorParameters<typeof StdioClientTransport>[0]);
    // Results are validated against their outputSchema off the host's thread (OutputValidator), never by the SDK.
    const client = new Client({ name: "moss-ts", version: "0.1.0" }, { jsonSchemaValidator: NO_VALIDATION });
    client.onerror = (error) => {
      // The SDK's stdio transport closes itself on a message past maxBufferSize; say why.
      if (/ReadBuffer exceeded maximum size/.test(error.message)) breakWith(oversized());
    };
    await client.connect(transport, { timeout });
    return client;
  };
  let client: Client | undefined;
  try {
    client = await open();
    const tools = await listAllTools(client, timeout);
    const version = client.getServerVersion();
    const instructions = client.getInstructions();
    let current = client;
    let broken = false;
    let closed = false;
    let reopening: Promise<Client> | undefined;
    const watch = (watched: Client): void => {
      watched.onclose = () => {
        if (watched === current) broken = true;
      };
    };
    watch(current);
    const connection: McpConnection = {
      client: current,
      connected: async () => {
        if (closed) throw new Error(`${label}: the connection is closed (its runtime was closed)`);
        if (!broken) return current;
        reopening ??= open()
          .then((next) => {
            current = next;
            connection.client = next;
            broken = false;
            watch(next);
            return next;
          })
          .finally(() => {
            reopening = undefined;
          });
        return reopening;
      },
      tools,
      server: {
        ...(version?.name ? { name: version.name } : {}),
        ...(version?.version ? { version: version.version } : {}),
        ...(instructions ? { instructions } : {}),
      },
      secrets,
      label,
      failureOf: (client) => failures.get(client),
      close: async () => {
        closed = true;
        await current.close();
      },
    };
    return connection;
  } catch (error) {
    await client?.close().catch(() => {});
    throw new Error(
      `${label}: cannot connect: ${secrets.redactText(error instanceof Error ? error.message : String(error))}`,
    );
  }
}

/** Every page of the tool list, bounded in pages, tools and time. */
async function listAllTools(client: Client, timeoutMs: number): Promise<Tool[]> {
  const tools: Tool[] = [];
  const signal = AbortSignal.timeout(timeoutMs);
  // Each page's request listens on the one signal of the whole listing.
  setMaxListeners(MAX_TOOL_PAGES + 1, signal);
  let cursor: string | undefined;
  for (let page = 0; ; page++) {
    if (page >= MAX_TOOL_PAGES)
      throw new Error(`the tool list has more than ${MAX_TOOL_PAGES} pages (${tools.length} tools read)`);
    if (signal.aborted)
      throw new Error(`reading the tool list took longer than ${timeoutMs} ms (${page} pages read)`);
    const result = await client.listTools(cursor ? { cursor } : {}, { timeout: timeoutMs, signal });
    tools.push(...result.tools);
    if (tools.length > MAX_TOOLS) throw new Error(`the tool list has more than ${MAX_TOOLS} tools`);
    cursor = result.nextCursor;
    if (!cursor) return tools;
  }
}

/**
 * The host object behind a generated MCP service type: one async method per tool, and `onDestroy` (the
 * `Injection` hook, never reachable from model code) that closes the connection when the runtime closes.
 */
export function createMcpService(
  connection: McpConnection,
  methods: readonly McpMethod[],
  options: McpCallOptions = {},
): Record<string, (args?: unknown) => Promise<unknown>> & { onDestroy(): Promise<void> } {
  const timeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxErrorChars = options.maxErrorChars ?? DEFAULT_MAX_ERROR_CHARS;
  const validator = new OutputValidator(options.validationTimeoutMs ?? DEFAULT_VALIDATION_TIMEOUT_MS);
  const { secrets } = connection;
  let closed = false;
  const service = Object.create(null) as Record<string, (args?: unknown) => Promise<unknown>> & {
    onDestroy(): Promise<void>;
  };
  for (const { name, tool } of methods) {
    const call = async (args?: unknown): Promise<unknown> => {
      // The run that made this call ending (timeout, error, completion) cancels it on the server too.
      const signal = currentRunSignal();
      if (closed) throw new Error(`${tool.name}: the MCP connection is closed (its runtime was closed)`);
      if (args !== undefined && (typeof args !== "object" || args === null || Array.isArray(args)))
        throw new TypeError(`${name}: pass one object of arguments`);
      let result: Awaited<ReturnType<Client["callTool"]>>;
      let client: Client | undefined;
      try {
        client = await connection.connected();
        result = await client.callTool(
          { name: tool.name, arguments: (args ?? {}) as Record<string, unknown> },
          undefined,
          { timeout, ...(signal ? { signal } : {}) },
        );
      } catch (error) {
        const cause = (client && connection.failureOf(client)) ?? error;
        const message = cause instanceof Error ? cause.message : String(cause);
        throw new Error(`${tool.name}: ${secrets.redactText(message)}`);
      }
      if (result.isError) {
        // Redacted before it is cut: a secret cut in half would no longer be recognised.
        const text = secrets.redactText(contentText(result.content)).slice(0, maxErrorChars);
        throw new McpToolError(text || `${tool.name} failed`);
      }
      if (tool.outputSchema) {
        if (result.structuredContent === undefined)
          throw new Error(`${tool.name}: the tool has an outputSchema but returned no structured content`);
        try {
          await validator.validate(tool.outputSchema, result.structuredContent, tool.name);
        } catch (error) {
          throw new Error(secrets.redactText((error as Error).message));
        }
        return secrets.redactValue(result.structuredContent);
      }
      return secrets.redactValue(result.content);
    };
    Object.defineProperty(service, name, { value: call, enumerable: true });
  }
  Object.defineProperty(service, "onDestroy", {
    value: async () => {
      if (closed) return;
      closed = true;
      validator.close();
      await connection.close();
    },
  });
  return service;
}

/** Tells the SDK every result is valid: moss-ts validates results itself, bounded, off the host's thread. */
const NO_VALIDATION: jsonSchemaValidator = {
  getValidator: (() => (input: unknown) => ({
    valid: true,
    data: input,
    errorMessage: undefined,
  })) as jsonSchemaValidator["getValidator"],
};

/** `fetch` whose response bodies stop with the error `tooLarge` makes past `maxBytes` (declared or streamed). */
function boundedFetch(maxBytes: number, tooLarge: () => Error): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    const declared = Number(response.headers.get("content-length"));
    if (Number.isFinite(declared) && declared > maxBytes) {
      await response.body?.cancel().catch(() => {});
      throw tooLarge();
    }
    if (!response.body) return response;
    let size = 0;
    const limited = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          size += chunk.byteLength;
          if (size > maxBytes) controller.error(tooLarge());
          else controller.enqueue(chunk);
        },
      }),
    );
    return new Response(limited, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

function contentText(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content
    .map((block: { type?: unknown; text?: unknown }) =>
      block?.type === "text" && typeof block.text === "string" ? block.text : "",
    )
    .filter(Boolean)
    .join("\n");
}

function redactedUrl(text: string): string {
  try {
    const url = new URL(text);
    return `${url.origin}${url.pathname}`;
  } catch {
    return "(invalid URL)";
  }
}

/** The variables a child process needs to start (PATH, HOME, …), without the host's secrets. */
function defaultEnvironment(): Record<string, string> {
  const keep = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "SystemRoot"];
  const environment: Record<string, string> = {};
  for (const key of keep) {
    const value = process.env[key];
    if (value !== undefined) environment[key] = value;
  }
  return environment;
}
