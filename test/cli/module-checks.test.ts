import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { EXIT } from "../../engine/cli/exit-codes.ts";
import { decodeProperties } from "../../engine/context/index.ts";
import { writeModule } from "../helpers/compile-from-text.ts";
import { runMoss } from "../helpers/moss-cli.ts";

const MODULE = [
  'import { Moss as Parent } from "moss-ts";',
  "export class Moss extends Parent {",
  "  turns = 0;",
  "  notes: string[] = [];",
  "}",
].join("\n");
const CODE = "function main(moss: Moss) {\n  moss.turns += 1;\n  return moss.turns;\n}\n";

const cleanup: string[] = [];
afterAll(async () => {
  await Promise.all(cleanup.map((file) => rm(file, { force: true, recursive: true })));
});

async function module(source: string): Promise<string> {
  const file = await writeModule(source);
  cleanup.push(file);
  return path.relative(process.cwd(), file);
}

async function folder(): Promise<string> {
  const directory = await mkdtemp(path.join(tmpdir(), "moss-checks-"));
  cleanup.push(directory);
  return directory;
}

describe("moss commands refuse a module that does not type-check: exit 4, file:line:col and the tsc message", () => {
  test("prompt, check, run, test and agent", async () => {
    const broken = await module(MODULE.replace("turns = 0;", 'turns: number = "zero";'));
    const replay = path.join(await folder(), "replay.json");
    await writeFile(replay, JSON.stringify([{ content: "done" }]), "utf8");
    const commands: Array<[string[], string?]> = [
      [["prompt", broken]],
      [["check", broken, "--code", "-"], CODE],
      [["run", broken, "--code", "-", "--sandbox", "in-process"], CODE],
      [["test", broken, "--sandbox", "in-process"]],
      [["agent", broken, "count", "--replay", replay]],
    ];
    for (const [args, input] of commands) {
      const result = await runMoss(args, input === undefined ? {} : { input });
      expect({ args, code: result.code }).toEqual({ args, code: EXIT.input });
      expect(result.stderr).toContain(
        `error[module-type-error]: ${broken}:3:3 - error TS2322: Type 'string' is not assignable to type 'number'.`,
      );
      expect(result.stderr).toContain('> 3 |   turns: number = "zero";');
    }
  });
});

describe("moss run --context: the context file is checked against the module", () => {
  test("a stored value of the wrong type: exit 4 naming the field, the file left byte for byte", async () => {
    const file = await module(MODULE);
    const contextFile = path.join(await folder(), "session.json");
    const first = await runMoss(
      ["run", file, "--code", "-", "--context", contextFile, "--sandbox", "in-process"],
      {
        input: CODE,
      },
    );
    expect(first.code).toBe(EXIT.ok);
    const saved = JSON.parse(await readFile(contextFile, "utf8"));
    saved.properties.turns = { json: "zero" };
    const text = `${JSON.stringify(saved, null, 2)}\n`;
    await writeFile(contextFile, text, "utf8");

    const result = await runMoss(
      ["run", file, "--code", "-", "--context", contextFile, "--sandbox", "in-process"],
      {
        input: CODE,
      },
    );
    expect(result.code).toBe(EXIT.input);
    expect(result.stderr).toContain(`error[context-mismatch]: ${contextFile}: a stored value does not fit`);
    expect(result.stderr).toContain('properties.turns: expected number, got string "zero"');
    expect(result.stderr).toContain(`${file}:3:3 - Moss.turns is declared here`);
    expect(result.stdout).toBe("");
    expect(await readFile(contextFile, "utf8")).toBe(text);
  });

  test("a context file of another module: exit 4 naming both, the file untouched", async () => {
    const mine = await module(MODULE);
    const other = await module(MODULE);
    const contextFile = path.join(await folder(), "session.json");
    expect(
      (
        await runMoss(["run", other, "--code", "-", "--context", contextFile, "--sandbox", "in-process"], {
          input: CODE,
        })
      ).code,
    ).toBe(EXIT.ok);
    const before = await readFile(contextFile, "utf8");
    const result = await runMoss(
      ["run", mine, "--code", "-", "--context", contextFile, "--sandbox", "in-process"],
      {
        input: CODE,
      },
    );
    expect(result.code).toBe(EXIT.input);
    expect(result.stderr).toContain(
      `error[context-wrong-module]: ${contextFile} was written for the module ${other} (${path.resolve(other)}), not ${mine} (${path.resolve(mine)})`,
    );
    expect(await readFile(contextFile, "utf8")).toBe(before);
  });

  test("a field the module no longer declares is kept in the file and reported once", async () => {
    const withRetired = await module(MODULE.replace("turns = 0;", 'turns = 0;\n  retired = "old";'));
    const contextFile = path.join(await folder(), "session.json");
    const run = (file: string) =>
      runMoss(["run", file, "--code", "-", "--context", contextFile, "--sandbox", "in-process"], {
        input: CODE,
      });
    expect((await run(withRetired)).code).toBe(EXIT.ok);
    const saved = JSON.parse(await readFile(contextFile, "utf8"));
    expect(decodeProperties(saved.properties).retired).toBe("old");

    // The field is removed from the module (the same file, edited).
    await writeFile(path.resolve(withRetired), MODULE, "utf8");
    const result = await run(withRetired);
    expect(result.code).toBe(EXIT.ok);
    expect(result.stdout).toContain("returned: 2");
    const warnings = result.stderr.match(
      /properties\.retired, which Moss in .* does not declare as a data field/g,
    );
    expect(warnings).toHaveLength(1);
    const after = JSON.parse(await readFile(contextFile, "utf8"));
    // Kept as it was stored (never decoded and written again), and still the same value.
    expect(after.properties.retired).toEqual(saved.properties.retired);
    expect(decodeProperties(after.properties)).toEqual({ notes: [], retired: "old", turns: 2 });
  });
});

describe("moss agent --session: the session's stored context is checked against the module", () => {
  test("a stored value of the wrong type: exit 4 naming the field, the session file left byte for byte", async () => {
    const file = await module(MODULE);
    const sessions = await folder();
    const replay = path.join(await folder(), "replay.json");
    await writeFile(replay, JSON.stringify([{ content: "done" }]), "utf8");
    const agent = () =>
      runMoss(["agent", file, "count", "--replay", replay, "--session", "s1", "--sessions-dir", sessions]);
    expect((await agent()).code).toBe(EXIT.ok);
    const sessionFile = path.join(sessions, "s1.json");
    const stored = JSON.parse(await readFile(sessionFile, "utf8"));
    stored.properties.turns = { json: "zero" };
    const text = `${JSON.stringify(stored, null, 2)}\n`;
    await writeFile(sessionFile, text, "utf8");
    const result = await agent();
    expect(result.code).toBe(EXIT.input);
    expect(result.stderr).toContain("error[context-mismatch]");
    expect(result.stderr).toContain('properties.turns: expected number, got string "zero"');
    expect(await readFile(sessionFile, "utf8")).toBe(text);
  });
});

describe("a module that uses Node checks without the user's @types/node", () => {
  test("moss prompt from a working directory with no node_modules above it: Node's types come with moss-ts", async () => {
    const file = await module(
      [
        MODULE,
        "// <moss-hide>",
        'import { readFileSync } from "node:fs";',
        "export function stock(file: string): number {",
        '  return JSON.parse(readFileSync(file, "utf8")).length;',
        "}",
        "// </moss-hide>",
      ].join("\n"),
    );
    const result = await runMoss(["prompt", path.resolve(file)], { cwd: await folder() });
    expect(result.stderr).not.toContain("error[module-type-error]");
    expect(result.code).toBe(EXIT.ok);
    expect(result.stdout).toContain("notes: string[] = [];");
    expect(result.stdout).not.toContain("readFileSync");
  });
});
