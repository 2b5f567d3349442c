import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { STOP_REASONS, type StopReason } from "../../engine/agent/moss-agent.ts";
import { EXIT_CODES } from "../../engine/cli/agent-command.ts";
import type { CliIo } from "../../engine/cli/cli-io.ts";
import { main } from "../../engine/cli/main.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { runMoss } from "../helpers/moss-cli.ts";
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

function io(
  env: Record<string, string> = {},
): CliIo & { out: () => string; err: () => string; all: () => string } {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  let all = "";
  stdout.on("data", (chunk) => {
    out += chunk;
    all += chunk;
  });
  stderr.on("data", (chunk) => {
    err += chunk;
    all += chunk;
  });
  return {
    stdout,
    stderr,
    stdin: new PassThrough(),
    env: { MOSS_TODO_FILE: join(directory, "todo.json"), ...env },
    cwd: process.cwd(),
    out: () => out,
    err: () => err,
    all: () => all,
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
    expect(out).toMatch(
      /── answer: the model answered in plain text \(no code\): the task is done or cannot be done · 2 step\(s\) · 2500 input \+ 48 output tokens · \$0\.0004\d* ──/,
    );
    expect(out).not.toContain("\x1b[");
    expect(server.requests[0]!.body.messages.at(-1)).toEqual({ role: "user", content: "Add call mum" });
    expect(JSON.parse(await readFile(join(sessions, "cli1.json"), "utf8")).module).toContain("context.ts");
    expect(
      JSON.parse(await readFile(join(sessions, "cli1.conversation.json"), "utf8")).messages,
    ).toHaveLength(4);
  });

  it("reads the model and agent settings from moss.config.yaml (--config); a flag wins over the file", async () => {
    const step = {
      content: "",
      toolCalls: [
        { name: "moss", arguments: JSON.stringify({ code: "async function main(moss: Moss) {}" }) },
      ],
    };
    server = await startFakeOpenAIServer([step, step, { content: "Done." }]);
    const file = join(directory, "moss.config.yaml");
    await writeFile(
      file,
      `model: { name: model-from-config, baseUrl: ${server.baseUrl} }\nagent: { maxSteps: 1 }\n`,
      "utf8",
    );
    process.env.MOSS_TODO_FILE = join(directory, "todo.json");
    const limited = io({ OPENAI_API_KEY: "k" });
    const stopped = await main(["agent", "examples/todo/context.ts", "Look", "--config", file], limited);
    expect(stopped).toBe(EXIT_CODES["max-steps"]);
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]!.body.model).toBe("model-from-config");
    const flagged = io({ OPENAI_API_KEY: "k" });
    const done = await main(
      [
        "agent",
        "examples/todo/context.ts",
        "Look",
        "--config",
        file,
        "--max-steps",
        "2",
        "--model",
        "flag-model",
      ],
      flagged,
    );
    delete process.env.MOSS_TODO_FILE;
    expect(done).toBe(0);
    expect(server.requests.slice(1).map((request) => request.body.model)).toEqual([
      "flag-model",
      "flag-model",
    ]);
  });

  it("names the place of a bad moss.config.yaml setting", async () => {
    const file = join(directory, "moss.config.yaml");
    await writeFile(file, "agent:\n  maxSteps: many\n", "utf8");
    const cli = io({ OPENAI_API_KEY: "k" });
    const code = await main(["agent", "examples/todo/context.ts", "Look", "--config", file], cli);
    expect(code).not.toBe(0);
    expect(cli.err()).toMatch(/moss\.config\.yaml:2:\d+/);
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

describe("moss agent against servers that misbehave (issue 9)", () => {
  const agent = (...extra: string[]) => [
    "agent",
    "examples/todo/context.ts",
    "List my todos",
    "--base-url",
    server!.baseUrl,
    ...extra,
  ];

  it("--help documents every stop reason with its exit code", async () => {
    const cli = io();
    expect(await main(["agent", "--help"], cli)).toBe(0);
    for (const [reason, exit] of Object.entries(EXIT_CODES)) {
      expect(cli.out()).toContain(`${reason} (${exit})`);
      expect(cli.out()).toContain(STOP_REASONS[reason as StopReason]);
    }
    expect(new Set(Object.values(EXIT_CODES).filter((exit) => exit !== 1)).size).toBe(5);
    expect(cli.out()).toContain("--max-tokens");
    expect(cli.out()).toContain("--context-tokens");
  });

  it("a model that rambles past --max-tokens stops with truncated, exit 5, and says why on the summary line", async () => {
    server = await startFakeOpenAIServer([{ ramble: true }, { ramble: true }, { ramble: true }], {
      contextTokens: 100_000,
    });
    const cli = io();
    const code = await main(agent("--max-tokens", "50", "--context-tokens", "100000"), cli);
    expect(code).toBe(5);
    expect(server.requests.map((request) => request.body.max_tokens)).toEqual([50, 50, 50]);
    expect(cli.out()).toContain("── cut-off · step 1 ──");
    expect(cli.out()).toMatch(
      /── truncated: the model's answer was cut off at the output limit of 50 tokens 3 time\(s\) in a row/,
    );
  });

  it("MOSS_MAX_TOKENS sets max_tokens when the flag is absent", async () => {
    server = await startFakeOpenAIServer([{ content: "You have no todos." }]);
    const cli = io({ MOSS_MAX_TOKENS: "77" });
    expect(await main(agent(), cli)).toBe(0);
    expect(server.requests[0]!.body.max_tokens).toBe(77);
  });

  it("an answer with neither code nor a final answer is told once, then stops with unclear-answer, exit 6", async () => {
    server = await startFakeOpenAIServer([{ content: "Let me look:" }, { content: "" }]);
    const cli = io();
    expect(await main(agent(), cli)).toBe(6);
    expect(cli.out()).toContain("── unclear-answer · step 1 ──");
    expect(cli.out()).toContain(
      "── unclear-answer: the model's answer was empty, also after being told once",
    );
  });

  it("a chatml <tool_call> in the text runs in tool mode", async () => {
    const call = JSON.stringify({
      name: "moss",
      arguments: {
        code: "async function main(moss: Moss) {\n  console.log((await moss.todos.list()).length);\n}",
      },
    });
    server = await startFakeOpenAIServer([
      { content: `<tool_call>\n${call}\n</tool_call>` },
      { content: "You have 0 todos." },
    ]);
    const cli = io();
    expect(await main(agent(), cli)).toBe(0);
    expect(cli.out()).toContain("── code · step 1 ──");
    expect(cli.out()).toContain("── result · ok");
  });

  it("a stream cut mid-answer: the error starts on its own line and says after how many chunks", async () => {
    server = await startFakeOpenAIServer([{ content: "Here is a long answer", cutAfterChunks: 3 }]);
    const cli = io();
    expect(await main(agent(), cli)).toBe(1);
    expect(cli.all()).toContain("Here is a long\nerror[model-connection]: The model server at");
    expect(cli.err()).toContain("closed the stream after 3 chunks");
    expect(cli.out()).toMatch(/── error: The model server at .* closed the stream after 3 chunks/);
  });

  it("a 200 that is not a completion exits 1 with a model-request error naming the server", async () => {
    server = await startFakeOpenAIServer([{ raw: "<html>upstream timed out</html>" }]);
    const cli = io();
    expect(await main(agent("--context-tokens", "8192"), cli)).toBe(1);
    expect(cli.err()).toContain(
      `error[model-request]: The model server at ${server.baseUrl} answered 200 but not with a chat completion`,
    );
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

  it("leaves none of the example's test lists behind once its process ended", async () => {
    const temp = await mkdtemp(join(directory, "tmp-"));
    const result = await runMoss(["test", "examples/todo/context.ts"], {
      env: { TMPDIR: temp, MOSS_NO_DAEMON: "1" },
    });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect((await readdir(temp)).filter((name) => name.startsWith("moss-todo-test-"))).toEqual([]);
  });
});
