import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type { ScriptedResponse } from "../../engine/agent/scripted-language-model.ts";
import { EXIT } from "../../engine/cli/exit-codes.ts";
import { runMoss } from "../helpers/moss-cli.ts";

const MODULE = "test/cli/fixtures/files/context.ts";
let directory: string;
let work: string;

beforeEach(async () => {
  directory = await mkdtemp(path.join(tmpdir(), "moss-cli-files-"));
  work = path.join(directory, "work");
  await mkdir(work);
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

async function recording(responses: ScriptedResponse[]): Promise<string> {
  const file = path.join(directory, "replay.json");
  await writeFile(file, JSON.stringify({ responses }));
  return file;
}

const step = (body: string): ScriptedResponse => ({
  toolCalls: [{ name: "moss", arguments: { code: `async function main(moss: Moss) {\n${body}\n}` } }],
});

describe("moss agent --working-directory", () => {
  test("binds a Files service confined to the folder: the model's code writes and lists there", async () => {
    const replay = await recording([
      step(
        '  await moss.files.write("todo.md", "- milk");\n  return (await moss.files.list()).entries.map((e) => e.name);',
      ),
      { content: "Written." },
    ]);
    const result = await runMoss([
      "agent",
      MODULE,
      "Note milk",
      "--replay",
      replay,
      "--working-directory",
      work,
    ]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(EXIT.ok);
    expect(result.stdout).toContain("[ 'todo.md' ]");
    expect(await readFile(path.join(work, "todo.md"), "utf8")).toBe("- milk");
  });

  test("remove asks for approval: --approve none leaves the file", async () => {
    await writeFile(path.join(work, "keep.md"), "keep");
    const replay = await recording([step('  await moss.files.remove("keep.md");'), { content: "Refused." }]);
    const result = await runMoss([
      "agent",
      MODULE,
      "Delete keep.md",
      "--replay",
      replay,
      "--working-directory",
      work,
      "--approve",
      "none",
    ]);
    expect(result.code).toBe(EXIT.ok);
    expect(result.stdout).toMatch(/approval files\.remove\("keep\.md"\)/);
    expect((await stat(path.join(work, "keep.md"))).isFile()).toBe(true);
  });

  test("a working directory that does not exist is an input error naming it", async () => {
    const replay = await recording([{ content: "x" }]);
    const missing = path.join(directory, "nowhere");
    const result = await runMoss(["agent", MODULE, "x", "--replay", replay, "--working-directory", missing]);
    expect(result.code).toBe(EXIT.input);
    expect(result.stderr).toContain(`--working-directory: the working directory ${missing} does not exist`);
  });
});
