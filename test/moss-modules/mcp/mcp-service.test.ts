import { mkdir, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MossCompiler } from "../../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../../engine/runtime/moss-runtime.ts";
import { type BindMcpOptions, bindMcp, type McpBinding } from "../../../moss-modules/mcp/index.ts";
import { type NotesServer, startNotesServer } from "./notes-server.ts";

const require = createRequire(import.meta.url);
const MEMORY_SERVER = require.resolve("@modelcontextprotocol/server-memory/dist/index.js");
const EVERYTHING_SERVER = require.resolve("@modelcontextprotocol/server-everything/dist/index.js");
const TOKEN = "mcp-bearer-token-never-shown";
const FOLDER = fileURLToPath(new URL(`../../fixtures/.tmp/mcp-${process.pid}/`, import.meta.url));

const CONTEXT = `import { Moss as Parent } from "moss-ts";
import type { Memory } from "./memory.api.ts";
import type { Everything } from "./everything.api.ts";
import type { Notes } from "./notes.api.ts";

export class Moss extends Parent {
  /** Your long-term memory: a knowledge graph. */
  memory!: Memory;
  /** A server that exercises every MCP feature. */
  everything!: Everything;
  /** The user's notes. */
  notes!: Notes;
}
`;

let notesServer: NotesServer;
let runtime: MossRuntime;

async function compile(source: string, bind: (compiler: MossCompiler) => Promise<McpBinding[]>) {
  const compiler = new MossCompiler({ sandbox: "in-process" });
  const bound = await bind(compiler);
  const file = path.join(
    FOLDER,
    `context-${bound.map((binding) => binding.name).join("-")}-${Date.now()}.ts`,
  );
  await writeFile(file, source);
  return { runtime: await compiler.compile(file), bindings: bound };
}

const options = (name: string): BindMcpOptions => ({
  typesFile: path.join(FOLDER, `${name}.api.ts`),
  timeoutMs: 15_000,
});

beforeAll(async () => {
  await mkdir(FOLDER, { recursive: true });
  notesServer = await startNotesServer(TOKEN);
  const compiled = await compile(CONTEXT, (compiler) =>
    Promise.all([
      bindMcp(
        compiler,
        "Memory",
        {
          command: process.execPath,
          args: [MEMORY_SERVER],
          env: { MEMORY_FILE_PATH: path.join(FOLDER, "memory.jsonl") },
        },
        options("memory"),
      ),
      bindMcp(
        compiler,
        "Everything",
        { command: process.execPath, args: [EVERYTHING_SERVER, "stdio"] },
        { ...options("everything"), tools: ["echo", "get-sum", "get-structured-content", "get-tiny-image"] },
      ),
      bindMcp(
        compiler,
        "Notes",
        { url: notesServer.url, headers: { authorization: `Bearer ${TOKEN}` } },
        options("notes"),
      ),
    ]),
  );
  runtime = compiled.runtime;
});

afterAll(async () => {
  await runtime?.close();
  await notesServer?.close();
  await rm(FOLDER, { recursive: true, force: true });
});

describe("MCP servers as typed services", () => {
  test("each tool is a typed method: arguments from inputSchema, return type from outputSchema, annotations in JSDoc", async () => {
    const prompt = await runtime.prompter().dumpModulePrompt();
    expect(prompt).toContain("create_entities(args: {");
    expect(prompt).toContain("entityNames: string[];");
    expect(prompt).toContain("DESTRUCTIVE: it deletes or overwrites data.");
    expect(prompt).toContain("getSum(args: {");
    expect(prompt).toContain("MCP tool `get-sum`.");
    expect(prompt).toMatch(
      /getStructuredContent\(args: \{[\s\S]*location: "New York" \| "Chicago" \| "Los Angeles";[\s\S]*\}\): Promise<\{[\s\S]*temperature: number;/,
    );
    expect(prompt).toContain("list_notes(): Promise<McpContent[]>;");
    expect(prompt).toContain('| { type: "text"; text: string }');
    expect(prompt).toContain("Read-only: it changes nothing.");
    expect(prompt).not.toContain(TOKEN);
  });

  test("model code creates entities in the memory server, reads them back and catches a tool error", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  await moss.memory.create_entities({ entities: [{ name: "Ada", entityType: "person", observations: ["writes programs"] }] });
  await moss.memory.add_observations({ observations: [{ entityName: "Ada", contents: ["likes tea"] }] });
  const graph = await moss.memory.open_nodes({ names: ["Ada"] });
  let failure = "";
  try {
    await moss.memory.add_observations({ observations: [{ entityName: "Nobody", contents: ["x"] }] });
  } catch (error) {
    failure = (error as Error).name + ": " + (error as Error).message;
  }
  return { entities: graph.entities, failure };
}`,
    });
    expect(execution.error).toBeUndefined();
    const returns = execution.returns as {
      entities: Array<{ name: string; observations: string[] }>;
      failure: string;
    };
    expect(returns.entities).toEqual([
      { name: "Ada", entityType: "person", observations: ["writes programs", "likes tea"] },
    ]);
    expect(returns.failure).toMatch(/^McpToolError: .*Nobody/);
  });

  test("tools without an output schema resolve to content blocks; structured results to typed data", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const sum = await moss.everything.getSum({ a: 2, b: 40 });
  const weather = await moss.everything.getStructuredContent({ location: "Chicago" });
  const image = await moss.everything.getTinyImage();
  return { sum: sum[0]?.type === "text" ? sum[0].text : "?", temperature: typeof weather.temperature, kinds: image.map((block) => block.type) };
}`,
    });
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toMatchObject({ sum: expect.stringContaining("42"), temperature: "number" });
    expect((execution.returns as { kinds: string[] }).kinds).toContain("image");
  });

  test("arguments the server rejects come back as a clear error naming the tool", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const sum = moss.everything.getSum as (args: unknown) => Promise<unknown>;
  try { await sum({ a: "two", b: 40 }); return "accepted"; } catch (error) { return (error as Error).name + ": " + (error as Error).message; }
}`,
    });
    expect(execution.returns).toBe(
      "McpToolError: MCP error -32602: Input validation error: Invalid arguments for tool get-sum: Invalid input: expected number, received string at a",
    );
  });

  test("over streamable HTTP with the host's auth header, which the model never sees", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const first = await moss.notes.add_note({ text: "buy milk" });
  const listed = await moss.notes.list_notes();
  let refused = "";
  try { await moss.notes.add_note({ text: "${TOKEN}" }); } catch (error) { refused = (error as Error).message; }
  return { first, listed, refused };
}`,
    });
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toEqual({
      first: { id: 1, count: 1 },
      listed: [{ type: "text", text: "buy milk" }],
      refused: "refusing a note that contains [redacted]",
    });
    // The context records the snippet (executeCode), which is the model's own text: everything else must not carry it.
    const { context, ...seen } = execution;
    expect(JSON.stringify({ ...seen, properties: context.properties })).not.toContain(TOKEN);
    expect(notesServer.authorizations.every((value) => value === `Bearer ${TOKEN}`)).toBe(true);
  });

  test("a changed tool list on the next compile changes the prompt", async () => {
    const source = `import { Moss as Parent } from "moss-ts";
import type { Notes } from "./notes.api.ts";
export class Moss extends Parent { notes!: Notes; }
`;
    const bind = (compiler: MossCompiler) =>
      Promise.all([
        bindMcp(
          compiler,
          "Notes",
          { url: notesServer.url, headers: { authorization: `Bearer ${TOKEN}` } },
          options("notes"),
        ),
      ]);
    notesServer.addArchiveTool();
    const second = await compile(source, bind);
    try {
      expect(second.bindings[0]!.changed).toBe(true);
      expect(await second.runtime.prompter().dumpModulePrompt()).toContain(
        "archive_notes(): Promise<McpContent[]>;",
      );
    } finally {
      await second.runtime.close();
    }
  });

  test("a wrong token is a located connection error that does not show the token", async () => {
    const compiler = new MossCompiler({ sandbox: "in-process" });
    const failure = await bindMcp(
      compiler,
      "Notes",
      { url: notesServer.url, headers: { authorization: "Bearer wrong-token-123" } },
      options("notes-wrong"),
    ).then(
      () => "connected",
      (error: Error) => error.message,
    );
    expect(failure).toMatch(
      new RegExp(`^MCP server ${notesServer.url.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: cannot connect: `),
    );
    expect(failure).not.toContain("wrong-token-123");
  });

  test("closing the runtime closes every connection once; later calls fail clearly", async () => {
    const compiled = await compile(
      `import { Moss as Parent } from "moss-ts";
import type { Everything } from "./everything-2.api.ts";
export class Moss extends Parent { everything!: Everything; }
`,
      (compiler) =>
        Promise.all([
          bindMcp(
            compiler,
            "Everything",
            { command: process.execPath, args: [EVERYTHING_SERVER, "stdio"] },
            { ...options("everything-2"), tools: ["echo"] },
          ),
        ]),
    );
    const service = compiled.bindings[0]!.service as unknown as { echo(args: object): Promise<unknown> };
    expect(await service.echo({ message: "hi" })).toEqual([{ type: "text", text: "Echo: hi" }]);
    await compiled.runtime.close();
    await expect(service.echo({ message: "again" })).rejects.toThrow(
      "echo: the MCP connection is closed (its runtime was closed)",
    );
  });
});
