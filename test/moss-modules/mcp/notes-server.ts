import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

/** A streamable-HTTP MCP server made with the SDK's own classes, on 127.0.0.1, behind a bearer token. */
export interface NotesServer {
  url: string;
  /** Registers one more tool (the next bind sees a changed tool list). */
  addArchiveTool(): void;
  /** Authorization headers the server received, in order. */
  authorizations: string[];
  close(): Promise<void>;
}

export async function startNotesServer(token: string): Promise<NotesServer> {
  const notes: string[] = [];
  const servers: McpServer[] = [];
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const authorizations: string[] = [];
  let archive = false;

  function build(): McpServer {
    const server = new McpServer({ name: "notes", version: "1.0.0" }, { instructions: "Keeps short notes." });
    server.registerTool(
      "add_note",
      {
        title: "Add a note",
        description: "Stores one note and returns its id.",
        inputSchema: { text: z.string().describe("The note's text.") },
        outputSchema: { id: z.number(), count: z.number().describe("How many notes there are now.") },
      },
      async ({ text }) => {
        if (text.includes(token)) throw new Error(`refusing a note that contains ${token}`);
        notes.push(text);
        const structured = { id: notes.length, count: notes.length };
        return {
          content: [{ type: "text", text: JSON.stringify(structured) }],
          structuredContent: structured,
        };
      },
    );
    server.registerTool(
      "list_notes",
      { description: "All notes, one text block each.", annotations: { readOnlyHint: true } },
      async () => ({ content: notes.map((text) => ({ type: "text" as const, text })) }),
    );
    server.registerTool(
      "clear_notes",
      { description: "Deletes every note.", annotations: { destructiveHint: true, readOnlyHint: false } },
      async () => {
        notes.length = 0;
        return { content: [{ type: "text", text: "cleared" }] };
      },
    );
    if (archive) {
      server.registerTool("archive_notes", { description: "Moves all notes to the archive." }, async () => ({
        content: [{ type: "text", text: "archived" }],
      }));
    }
    servers.push(server);
    return server;
  }

  const http: Server = createServer(async (request, response) => {
    authorizations.push(String(request.headers.authorization));
    if (request.headers.authorization !== `Bearer ${token}`) {
      response.writeHead(401, { "content-type": "application/json" }).end('{"error":"unauthorized"}');
      return;
    }
    const sessionId = request.headers["mcp-session-id"];
    let transport = typeof sessionId === "string" ? transports.get(sessionId) : undefined;
    if (!transport) {
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => void transports.set(id, created),
      });
      await build().connect(created);
      transport = created;
    }
    await transport.handleRequest(request, response);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    authorizations,
    addArchiveTool: () => {
      archive = true;
    },
    close: async () => {
      await Promise.all(servers.map((server) => server.close().catch(() => {})));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
