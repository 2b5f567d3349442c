import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import type { CliIo } from "../../engine/cli/cli-io.ts";
import { main } from "../../engine/cli/main.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "./fake-openai-server.ts";

let server: FakeOpenAIServer | undefined;
let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-cli-"));
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  await rm(directory, { recursive: true, force: true });
});
afterAll(async () => {
  await closeSharedSandboxes();
});

function io(env: Record<string, string> = {}): CliIo & { out: () => string; err: () => string } {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (chunk) => (out += chunk));
  stderr.on("data", (chunk) => (err += chunk));
  return {
    stdout,
    stderr,
    stdin: new PassThrough(),
    env: { MOSS_TODO_FILE: join(directory, "todo.json"), ...env },
    cwd: process.cwd(),
    out: () => out,
    err: () => err,
  };
}

describe("moss agent", () => {
  it("streams text, code and results, ends with usage, keeps the session, and uses no colour off a TTY", async () => {
    server = await startFakeOpenAIServer([
      {
        content: "Adding.",
        toolCalls: [
          {
            name: "moss",
            arguments: JSON.stringify({
              code: "async function main(moss: Moss) {\n  await moss.todos.add('call mum');\n  console.log('added');\n}",
            }),
          },
        ],
        promptTokens: 1200,
        completionTokens: 40,
      },
      { content: "Added 'call mum'.", promptTokens: 1300, completionTokens: 8 },
    ]);
    const cli = io({ OPENAI_API_KEY: "k" });
    process.env.MOSS_TODO_FILE = join(directory, "todo.json");
    const sessions = join(directory, "sessions");
    const code = await main(
      [
        "agent",
        "examples/todo/context.ts",
        "Add",
        "call mum",
        "--base-url",
        server.baseUrl,
        "--model",
        "gpt-4o-mini",
        "--session",
        "cli1",
        "--sessions-dir",
        sessions,
      ],
      cli,
    );
    delete process.env.MOSS_TODO_FILE;
    expect(cli.err()).toBe("");
    expect(code).toBe(0);
    const out = cli.out();
    expect(out).toContain("Adding.");
    expect(out).toContain("── code · step 1 ──\nasync function main(moss: Moss) {");
    expect(out).toContain("── result · ok");
    expect(out).toContain("<stdout>\nadded\n</stdout>");
    expect(out).toContain("Added 'call mum'.");
    expect(out).toMatch(/── answer · 2 step\(s\) · 2500 input \+ 48 output tokens · \$0\.0004\d* ──/);
    expect(out).not.toContain("\x1b[");
    expect(server.requests[0]!.body.messages.at(-1)).toEqual({ role: "user", content: "Add call mum" });
    expect(JSON.parse(await readFile(join(sessions, "cli1.json"), "utf8")).module).toContain("context.ts");
    expect(
      JSON.parse(await readFile(join(sessions, "cli1.conversation.json"), "utf8")).messages,
    ).toHaveLength(4);
  });

  it("reports a refused connection as an error naming the URL, exit code 1", async () => {
    const cli = io();
    const code = await main(
      ["agent", "examples/todo/context.ts", "hi", "--base-url", "http://127.0.0.1:9/v1"],
      cli,
    );
    expect(code).toBe(1);
    expect(cli.err()).toContain("error[model-connection]:");
    expect(cli.err()).toContain("http://127.0.0.1:9/v1");
  });

  it("rejects a bad --max-steps with the usage", async () => {
    const cli = io();
    expect(await main(["agent", "examples/todo/context.ts", "hi", "--max-steps", "0"], cli)).toBe(2); // a usage error (see moss --help: exit codes)
    expect(cli.err()).toContain("--max-steps needs a positive integer");
  });
});

describe("moss test", () => {
  it("prints one line per case and a summary", async () => {
    const cli = io();
    process.env.MOSS_TODO_FILE = join(directory, "todo.json");
    const code = await main(["test", "examples/todo/context.ts"], cli);
    delete process.env.MOSS_TODO_FILE;
    expect(cli.err()).toBe("");
    expect(code).toBe(0);
    expect(cli.out()).toMatch(/✓ testAddTagComplete \(\d+ ms\)/);
    expect(cli.out()).toMatch(/✓ remembers a preference/);
    expect(cli.out()).toContain("2 passed, 0 failed (examples/todo/context.ts)");
  });
});
