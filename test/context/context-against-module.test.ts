import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Project } from "ts-morph";
import { afterEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { encodeProperties, FileContextStore } from "../../engine/context/index.ts";
import { declaredTypeProblem } from "../../engine/module/fits-declared-type.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { MossContext } from "../../engine/types.ts";
import { writeModule } from "../helpers/compile-from-text.ts";
import { rejection } from "../helpers/rejection.ts";

const types = new Project({
  useInMemoryFileSystem: true,
  compilerOptions: { strict: true, lib: ["lib.es2023.d.ts"] },
});
let counter = 0;

/** The problem of `value` against the type written as `typeText` (with `declarations` in scope). */
function problem(typeText: string, value: unknown, declarations = ""): string | undefined {
  const file = types.createSourceFile(
    `case-${++counter}.ts`,
    `${declarations}\nexport declare const checked: ${typeText};`,
  );
  const type = file.getVariableDeclarationOrThrow("checked").getType();
  return declaredTypeProblem(value, type.compilerType, types.getTypeChecker().compilerObject, "properties.x");
}

describe("declaredTypeProblem: does a stored value fit its field's declared type", () => {
  test.each<[string, unknown, string | undefined]>([
    ["number", 3, undefined],
    ["number", "zero", 'properties.x: expected number, got string "zero"'],
    ["string", 1, "properties.x: expected string, got number 1"],
    ["boolean", "true", 'properties.x: expected boolean, got string "true"'],
    ["bigint", 3n, undefined],
    ["bigint", 3, "properties.x: expected bigint, got number 3"],
    ['"a" | "b"', "b", undefined],
    ['"a" | "b"', "c", 'properties.x: expected "a" | "b", got string "c"'],
    ["1 | 2", 3, "properties.x: expected 1 | 2, got number 3"],
    ["true", false, "properties.x: expected true, got boolean false"],
    ["number | undefined", undefined, undefined],
    ["number", undefined, "properties.x: expected number, got undefined"],
    ["string | null", null, undefined],
    ["string | null", 3, "properties.x: expected string | null, got number 3"],
    ["string[]", ["a", "b"], undefined],
    ["string[]", ["a", 1], "properties.x[1]: expected string, got number 1"],
    ["readonly number[]", "1,2", 'properties.x: expected readonly number[], got string "1,2"'],
    ["[string, number]", ["a", 1], undefined],
    ["[string, number]", ["a"], "properties.x: expected [string, number], got an array of 1"],
    ["[string, ...number[]]", ["a", 1, "2"], 'properties.x[2]: expected number, got string "2"'],
    ["Record<string, number>", { a: 1, b: "2" }, 'properties.x.b: expected number, got string "2"'],
    ["{ name: string; age?: number }", { name: "ann" }, undefined],
    ["{ name: string; age?: number }", { age: 3 }, "properties.x.name: expected string, missing"],
    ["{ name: string }", ["ann"], "properties.x: expected { name: string; }, got an array of 1"],
    [
      "{ items: Array<{ id: number }> }",
      { items: [{ id: "1" }] },
      'properties.x.items[0].id: expected number, got string "1"',
    ],
    ["Date", new Date(0), undefined],
    ["Date", "1970-01-01", 'properties.x: expected Date, got string "1970-01-01"'],
    ["{ when: Date }", { when: {} }, "properties.x.when: expected Date, got an object"],
    ["Map<string, number>", new Map([["a", 1]]), undefined],
    ["Map<string, number>", new Map([["a", "1"]]), 'properties.x.get("a"): expected number, got string "1"'],
    ["Map<string, number>", { a: 1 }, "properties.x: expected Map<string, number>, got an object"],
    ["Set<number>", new Set([1, 2]), undefined],
    ["Set<number>", new Set(["a"]), 'properties.x (element "a"): expected number, got string "a"'],
    ["Uint8Array", new Uint8Array(2), undefined],
    ["unknown", Symbol.iterator, undefined],
    ["object", null, "properties.x: expected object, got null"],
  ])("%s ← %o", (typeText, value, expected) => {
    expect(problem(typeText, value)).toBe(expected);
  });

  test("enums, interfaces and recursive types from declarations", () => {
    const declarations = `enum Colour { Red = "red", Blue = "blue" }
interface Item { label: string; next?: Item }`;
    expect(problem("Colour", "red", declarations)).toBeUndefined();
    expect(problem("Colour", "green", declarations)).toBe(
      'properties.x: expected Colour, got string "green"',
    );
    const circular: Record<string, unknown> = { label: "a" };
    circular.next = circular;
    expect(problem("Item", circular, declarations)).toBeUndefined();
    expect(problem("Item", { label: "a", next: { label: 2 } }, declarations)).toBe(
      "properties.x.next.label: expected string, got number 2",
    );
  });
});

const MODULE = [
  'import { Moss as Parent } from "moss-ts";',
  "export class Moss extends Parent {",
  "  turns = 0;",
  "  notes: string[] = [];",
  "}",
].join("\n");

const open: MossRuntime[] = [];
const files: string[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((runtime) => runtime.close()));
  await Promise.all(files.splice(0).map((file) => rm(file, { force: true, recursive: true })));
});

async function compile(modulePath: string, context?: MossContext, source?: string): Promise<MossRuntime> {
  const compiler = new MossCompiler({ sandbox: "in-process" });
  if (context) compiler.joinContext(context, source === undefined ? {} : { source });
  const runtime = await compiler.compile(modulePath);
  open.push(runtime);
  return runtime;
}

async function moduleFile(source = MODULE): Promise<string> {
  const file = await writeModule(source);
  files.push(file);
  return file;
}

function contextOf(module: string, values: Record<string, unknown>): MossContext {
  return { version: 1, module, properties: encodeProperties(values).properties, executed: false };
}

describe("a context is checked against the module it is applied to", () => {
  test("a stored value that does not fit its field is a located MossError naming the field, and nothing loads", async () => {
    const file = await moduleFile();
    const error = await rejection(
      compile(file, contextOf(file, { turns: "zero", notes: ["a"] }), "session.json"),
    );
    expect(error.code).toBe("context-mismatch");
    expect(error.message).toContain("session.json: a stored value does not fit");
    expect(error.message).toContain('  properties.turns: expected number, got string "zero"');
    expect(error.message).toContain(`${file}:3:3 - Moss.turns is declared here`);
    expect(error.message).toContain("> 3 |   turns = 0;");
    expect(error.details).toMatchObject({ file: "session.json", fields: ["turns"], line: 3, column: 3 });

    const both = await rejection(compile(file, contextOf(file, { turns: 1, notes: "a" })));
    expect(both.message).toContain("the joined MossContext: a stored value does not fit");
    expect(both.message).toContain('properties.notes: expected string[], got string "a"');
  });

  test("every misfit is listed, not only the first", async () => {
    const file = await moduleFile();
    const error = await rejection(compile(file, contextOf(file, { turns: true, notes: [1] })));
    expect(error.message).toContain("2 stored values do not fit");
    expect(error.details.problems).toEqual([
      "properties.turns: expected number, got boolean true",
      "properties.notes[0]: expected string, got number 1",
    ]);
  });

  test("a context written for another module is refused, naming both", async () => {
    const file = await moduleFile();
    const other = await moduleFile();
    const error = await rejection(compile(file, contextOf(other, { turns: 1 }), "session.json"));
    expect(error.code).toBe("context-wrong-module");
    expect(error.message).toContain(
      `session.json was written for the module ${other} (${other}), not ${file} (${file})`,
    );
    expect(error.details).toMatchObject({ contextModule: other, module: file });
    // The same file named by a relative or an absolute path is the same module; a bare file name elsewhere is not.
    const relative = path.relative(process.cwd(), file);
    const runtime = await compile(file, contextOf(relative, { turns: 4 }));
    expect(runtime.hostMoss().turns).toBe(4);
    const named = await rejection(compile(file, contextOf(path.basename(file), { turns: 5 })));
    expect(named.code).toBe("context-wrong-module");
    expect(named.message).toContain(`set "module" in the file to ${JSON.stringify(file)}`);
  });

  test("fields no longer declared are kept on every save, reported once, and never reach moss", async () => {
    const file = await moduleFile();
    const context = contextOf(file, { turns: 2, notes: ["kept"], retired: { since: new Date(7) } });
    const runtime = await compile(file, context, "session.json");
    expect(runtime.compileWarnings()).toEqual([
      `session.json holds properties.retired, which Moss in ${file} does not declare as a data field: kept in the context, not loaded`,
    ]);
    const execution = await runtime.execute({
      code: 'function main(moss: Moss) { moss.turns += 1; return Object.keys(moss).includes("retired"); }',
    });
    expect(execution.ok).toBe(true);
    expect(execution.returns).toBe(false);
    expect(execution.warnings).toEqual([]);
    expect(execution.context.properties.retired).toEqual(context.properties.retired);
    expect(runtime.hostMoss().turns).toBe(2);
    // Declared again later, the field finds its value.
    const back = await moduleFile(
      MODULE.replace("  turns = 0;", "  turns = 0;\n  retired?: { since: Date };"),
    );
    const revived = await compile(back, { ...execution.context, module: back });
    expect((revived.hostMoss().retired as { since: Date }).since.getTime()).toBe(7);
    expect(revived.hostMoss().turns).toBe(3);
  });

  test("FileContextStore: a session whose field changed type fails to load into the module; its file is untouched", async () => {
    const directory = await mkdtemp(path.join(tmpdir(), "moss-context-"));
    files.push(directory);
    const file = await moduleFile();
    const store = new FileContextStore(directory);
    const first = await compile(file);
    const execution = await first.execute({
      code: 'function main(moss: Moss) { moss.notes.push("a"); moss.turns = 4; }',
    });
    await store.save("s1", execution.context);
    await store.close();
    const before = await readFile(store.contextPath("s1"));

    await writeFile(file, MODULE.replace("notes: string[] = []", "notes: number[] = []"), "utf8");
    const saved = await store.load("s1");
    const error = await rejection(compile(file, saved!, store.contextPath("s1")));
    expect(error.code).toBe("context-mismatch");
    expect(error.message).toContain(`${store.contextPath("s1")}: a stored value does not fit`);
    expect(error.message).toContain('properties.notes[0]: expected number, got string "a"');
    expect(await readFile(store.contextPath("s1"))).toEqual(before);
  });
});
