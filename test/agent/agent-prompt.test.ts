import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { buildSystemPrompt, fenceModulePrompt, MODULE_HEADING } from "../../engine/agent/agent-prompt.ts";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { fencedBlocks } from "../../engine/fenced-code.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";

const GOLDEN = path.resolve("test/golden");

/** Compares with a golden file; `UPDATE_GOLDEN=1` rewrites it (review the diff). */
async function expectGolden(name: string, actual: string): Promise<void> {
  const file = path.join(GOLDEN, name);
  if (process.env.UPDATE_GOLDEN) await writeFile(file, actual, "utf8");
  expect(actual).toBe(await readFile(file, "utf8"));
}

/** Every fence line of the markdown, in order (an opening or closing line of a block). */
function fenceLines(markdown: string): string[] {
  return markdown.split("\n").filter((line) => /^\s*(`{3,}|~{3,})/.test(line));
}

describe("the system prompt never nests fences", () => {
  const open: MossRuntime[] = [];
  afterAll(async () => {
    await Promise.all(open.map((runtime) => runtime.close()));
  });

  test("the sphero example's system prompt: every block closed, none inside another (golden)", async () => {
    const runtime = await new MossCompiler({ sandbox: "in-process" }).compile("examples/sphero/context.ts");
    open.push(runtime);
    const modulePrompt = await runtime.prompter().dumpModulePrompt();
    for (const tools of [true, false]) {
      const prompt = buildSystemPrompt(modulePrompt, { tools });
      const blocks = fencedBlocks(prompt);
      expect(blocks.every((block) => block.closed)).toBe(true);
      // Two fence lines per block: no fence line was swallowed as the body of another block.
      expect(fenceLines(prompt)).toHaveLength(blocks.length * 2);
      expect(blocks.some((block) => fenceLines(block.body).length > 0)).toBe(false);
      expect(prompt).toContain(`${MODULE_HEADING}\n\n${modulePrompt.trim()}`);
      await expectGolden(tools ? "sphero.system-prompt.md" : "sphero.system-prompt.fences.md", prompt);
    }
  });

  test("plain code is fenced with more backticks than any run inside it", () => {
    expect(fenceModulePrompt("export class Moss {}")).toBe("```typescript\nexport class Moss {}\n```");
    const withRun = "/** Write ```ts blocks. */\nexport class Moss {}";
    const fenced = fenceModulePrompt(withRun);
    expect(fenced.startsWith("````typescript\n")).toBe(true);
    expect(fencedBlocks(fenced)).toEqual([{ language: "typescript", body: withRun, closed: true }]);
  });

  test("a module prompt that holds fenced blocks is placed as it is", () => {
    const markdown = "The module:\n\n```typescript\nexport class Moss {}\n```";
    expect(fenceModulePrompt(markdown)).toBe(markdown);
  });
});
