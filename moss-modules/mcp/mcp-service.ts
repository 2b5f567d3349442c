import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { SecretRegistry } from "../openapi/auth.ts";
import type { McpMethod } from "./mcp-declaration.ts";

/** A server started as a child process that speaks MCP on its stdin/stdout. */
export interface McpStdioServer {
  command: string;
  args?: string[];
  /** The child's environment (added to a minimal safe default, not to the host's whole environment). */
  env?: Record<string, string>;
  cwd?: string;
}

/** A server reached over streamable HTTP; `headers` (e.g. authorization) stay on the host. */
export interface McpHttpServer {
  url: string;
  headers?: Record<string, string>;
}

/** Where the MCP server is. */
export type McpServer = McpStdioServer | McpHttpServer;

/** Limits of calls to an MCP server. */
export interface McpCallOptions {
  /** Per tool call (and for connecting and listing tools). Default 30 000. */
  timeoutMs?: number;
  /** Most characters of a tool's error text kept in the error message. Default 2 000. */
  maxErrorChars?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_ERROR_CHARS = 2_000;

/** An error a tool reported (`isError`), as model code sees it. */
export class McpToolError extends Error {
  override name = "McpToolError";
}

/** A connected MCP client with the server's tool list and what it says about itself. */
export interface McpConnection {
  client: Client;
  tools: Tool[];
  server: { name?: string; version?: string; instructions?: string };
  secrets: SecretRegistry;
  label: string;
}

/** Connects, reads the tool list (all pages) and returns the connection; a failure names the server. */
export async function connectMcp(server: McpServer, options: McpCallOptions = {}): Promise<McpConnection> {
  const timeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const secrets = new SecretRegistry();
  const label =
    "url" in server ? `MCP server ${redactedUrl(server.url)}` : `MCP server \`${server.command}\``;
  let transport: StdioClientTransport | StreamableHTTPClientTransport;
  if ("url" in server) {
    for (const value of Object.values(server.headers ?? {})) {
      secrets.add(value);
      // "Bearer <token>", "Basic <credentials>": the credential alone is a secret too.
      const credential = /^\S+\s+(\S{8,})$/.exec(value.trim())?.[1];
      if (credential) secrets.add(credential);
    }
    let url: URL;
    try {
      url = new URL(server.url);
    } catch {
      throw new Error(`${label}: not an absolute URL`);
    }
    transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { ...server.headers } } });
  } else {
    transport = new StdioClientTransport({
      command: server.command,
      args: server.args ?? [],
      ...(server.env ? { env: { ...defaultEnvironment(), ...server.env } } : {}),
      ...(server.cwd ? { cwd: server.cwd } : {}),
      stderr: "ignore",
    });
  }
  const client = new Client({ name: "moss-ts", version: "0.1.0" });
  try {
    await client.connect(transport, { timeout });
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : {}, { timeout });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor && tools.length < 10_000);
    const version = client.getServerVersion();
    const instructions = client.getInstructions();
    return {
      client,
      tools,
      server: {
        ...(version?.name ? { name: version.name } : {}),
        ...(version?.version ? { version: version.version } : {}),
        ...(instructions ? { instructions } : {}),
      },
      secrets,
      label,
    };
  } catch (error) {
    await client.close().catch(() => {});
    throw new Error(
      `${label}: cannot connect: ${secrets.redact(error instanceof Error ? error.message : String(error))}`,
      {
        cause: error,
      },
    );
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
  let closed = false;
  const service = Object.create(null) as Record<string, (args?: unknown) => Promise<unknown>> & {
    onDestroy(): Promise<void>;
  };
  for (const { name, tool } of methods) {
    const call = async (args?: unknown): Promise<unknown> => {
      if (closed) throw new Error(`${tool.name}: the MCP connection is closed (its runtime was closed)`);
      if (args !== undefined && (typeof args !== "object" || args === null || Array.isArray(args)))
        throw new TypeError(`${name}: pass one object of arguments`);
      let result: Awaited<ReturnType<Client["callTool"]>>;
      try {
        result = await connection.client.callTool(
          { name: tool.name, arguments: (args ?? {}) as Record<string, unknown> },
          undefined,
          { timeout },
        );
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        throw new Error(`${tool.name}: ${connection.secrets.redact(message)}`);
      }
      if (result.isError) {
        const text = contentText(result.content).slice(0, maxErrorChars);
        throw new McpToolError(connection.secrets.redact(text || `${tool.name} failed`));
      }
      return tool.outputSchema ? result.structuredContent : result.content;
    };
    Object.defineProperty(service, name, { value: call, enumerable: true });
  }
  Object.defineProperty(service, "onDestroy", {
    value: async () => {
      if (closed) return;
      closed = true;
      await connection.client.close();
    },
  });
  return service;
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
