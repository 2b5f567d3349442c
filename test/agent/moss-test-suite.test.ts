import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MossTestSuite } from "../../engine/agent/moss-test-suite.ts";
import { main } from "../../engine/cli/main.ts";
import { MossError } from "../../engine/errors.ts";
import { type TodoFilter, type TodoItem, TodoList } from "../../examples/todo/todo-list.ts";
import { writeModule } from "../helpers/compile-from-text.ts";

const MODULE = "examples/todo/context.ts";
let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-suite-"));
  process.env.MOSS_TODO_FILE = join(directory, "todo.json");
});
afterEach(async () => {
  delete process.env.MOSS_TODO_FILE;
  await rm(directory, { recursive: true, force: true });
});

/** An in-memory fake injected in place of the JSON-file list. */
class FakeTodoList extends TodoList {
  readonly items: TodoItem[] = [{ id: 7, title: "fake item", done: false, tags: ["fake"] }];
  async add(title: string): Promise<TodoItem> {
    const item = { id: this.items.length + 100, title, done: false, tags: [] };
    this.items.push(item);
    return item;
  }
  async list(_filter?: TodoFilter): Promise<TodoItem[]> {
    return this.items;
  }
  async complete(id: number): Promise<TodoItem> {
    return { ...this.items.find((item) => item.id === id)!, done: true };
  }
  async update(id: number): Promise<TodoItem> {
    return this.items.find((item) => item.id === id)!;
  }
  async remove(): Promise<void> {}
}

describe("MossTestSuite", () => {
  it("dumps the module prompt", async () => {
    const prompt = await new MossTestSuite().dumpPrompt(MODULE);
    expect(prompt).toContain("todos!: TodoList;");
    expect(prompt).not.toContain("testAddTagComplete");
  });

  it("runs code with injected fakes that win over the host setup", async () => {
    const fake = new FakeTodoList();
    const execution = await new MossTestSuite().run(MODULE, {
      code: "async function main(moss: Moss) {\n  await moss.todos.add('from test');\n  return (await moss.todos.list()).map((item) => item.title);\n}",
      inject: [[TodoList, fake]],
    });
    expect(execution.ok).toBe(true);
    expect(execution.returns).toEqual(["fake item", "from test"]);
    expect(fake.items.map((item) => item.title)).toEqual(["fake item", "from test"]);
  });

  it("injected fakes win over the module's own __moss_compile__ default, and the conflict is reported", async () => {
    const module = await writeModule(
      `import { Moss as Parent, type MossCompiler } from "moss-ts";
export interface Weather { today(): string }
export class Moss extends Parent { weather!: Weather; }
// <moss-hide>
export function __moss_compile__(compiler: MossCompiler) { compiler.bind("Weather", { today: () => "module default" }); }
// </moss-hide>
`,
      "weather",
    );
    const warnings: string[] = [];
    const listener = (warning: Error & { code?: string }) => {
      if (warning.code === "MOSS_BINDING_CONFLICT") warnings.push(warning.message);
    };
    process.on("warning", listener);
    const execution = await new MossTestSuite().run(module, {
      code: "function main(moss: Moss) { return moss.weather.today(); }",
      inject: [["Weather", { today: () => "sunny fake" }]],
    });
    await new Promise((resolve) => setImmediate(resolve));
    process.off("warning", listener);
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toBe("sunny fake");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/binding conflict for "Weather".*compiler\.bind\/register before compile/);
  });

  it("runs a module function as the target when no code is given", async () => {
    const execution = await new MossTestSuite().run(MODULE, {
      target: "testAddTagComplete",
      inject: [[TodoList, new FakeTodoList()]],
    });
    expect(execution.ok).toBe(true);
    expect(execution.returns).toEqual(["fake", "(none)"]);
  });

  it("runs every __moss_test_cases__ entry in its own runtime and reports each", async () => {
    const seen: string[] = [];
    const report = await new MossTestSuite().runModuleTests(MODULE, {
      onResult: (result) => seen.push(result.name),
    });
    expect(seen).toEqual(["testAddTagComplete", "remembers a preference"]);
    expect(report).toMatchObject({ ok: true, passed: 2, failed: 0 });
    expect(report.results[0]!.execution!.returns).toEqual(["work"]);
    expect(report.results[1]!.execution!.returns).toEqual(["short titles"]);
  });

  it("reports a failing case without stopping the others, and rejects non-literal test case lists", async () => {
    const module = join(directory, "cases.ts");
    await writeFile(
      module,
      'export const __moss_test_cases__ = ["missing", { name: "ok", code: "async function main() { return 1 }" }];\n',
    );
    const suite = new MossTestSuite();
    await expect(suite.testCases(module)).rejects.toThrowError(/no function "missing"/);
    await writeFile(module, "const names = ['a'];\nexport const __moss_test_cases__ = names;\n");
    const error = await suite.testCases(module).catch((caught: unknown) => caught);
    expect(MossError.is(error, "hook-shape")).toBe(true);
    expect((error as Error).message).toContain("cases.ts:2:14");
  });

  it("a case whose run pauses for a person fails and says what it waited for (no one can answer in a test)", async () => {
    const module = join(directory, "asks.ts");
    await writeFile(
      module,
      `export const __moss_test_cases__ = [
  { name: "asks", code: "async function main(moss: any) { return moss.ask('Which colour?'); }" },
  { name: "asks but expects an error", code: "async function main(moss: any) { return moss.ask('Why?'); }", expectError: "runtime" },
];
`,
    );
    const report = await new MossTestSuite().runModuleTests(module);
    expect(report).toMatchObject({ ok: false, passed: 0, failed: 2 });
    for (const result of report.results) {
      expect(result.failure).toMatch(/the run paused waiting for a person: answer "(Which colour|Why)\?"/);
    }
  });

  it("a case can expect a failure: kind and message pattern met pass, unmet ones fail with a clear message", async () => {
    const module = join(directory, "errors.ts");
    await writeFile(
      module,
      `export function divide(a: number, b: number): number {
  if (b === 0) throw new RangeError("division by zero");
  return a / b;
}

export const __moss_test_cases__ = [
  { name: "divides", code: "function main() { return divide(6, 3); }" },
  { name: "zero is refused", code: "function main() { return divide(1, 0); }", expectError: { kind: "runtime", message: /division by ZERO/i } },
  { name: "kind only", code: "function main() { return divide(1, 0); }", expectError: "runtime" },
  { name: "type path", code: "function main() { return divide('a', 1); }", expectError: { kind: "type", message: "not assignable" } },
  { name: "expects but succeeds", code: "function main() { return divide(1, 1); }", expectError: "runtime" },
  { name: "wrong kind", code: "function main() { return divide('a', 1); }", expectError: "runtime" },
  { name: "wrong message", code: "function main() { return divide(1, 0); }", expectError: { kind: "runtime", message: "overflow" } },
];
`,
    );
    const report = await new MossTestSuite().runModuleTests(module);
    const outcome = Object.fromEntries(report.results.map((result) => [result.name, result.ok]));
    expect(outcome).toEqual({
      divides: true,
      "zero is refused": true,
      "kind only": true,
      "type path": true,
      "expects but succeeds": false,
      "wrong kind": false,
      "wrong message": false,
    });
    expect(report).toMatchObject({ ok: false, passed: 4, failed: 3 });
    const failure = (name: string) => report.results.find((result) => result.name === name)?.failure;
    expect(failure("zero is refused")).toBeUndefined();
    expect(failure("expects but succeeds")).toBe(
      "expected a runtime error, but the code ran without error (returned 1)",
    );
    expect(failure("wrong kind")).toMatch(/^expected a runtime error, but got a type error: /);
    expect(failure("wrong message")).toBe(
      'expected a runtime error with a message matching "overflow", but the runtime error was: division by zero',
    );
    expect(report.results[1]!.expectError).toEqual({ kind: "runtime", message: /division by ZERO/i });
  });

  it("an unknown expected kind is refused when the cases are read, naming the kinds and the line", async () => {
    const module = join(directory, "bad-kind.ts");
    await writeFile(
      module,
      'export const __moss_test_cases__ = [\n  { code: "function main() {}", expectError: "oops" },\n];\n',
    );
    const error = await new MossTestSuite().testCases(module).catch((caught: unknown) => caught);
    expect(MossError.is(error, "hook-shape")).toBe(true);
    expect((error as Error).message).toContain("bad-kind.ts:2:");
    expect((error as Error).message).toContain('"runtime"');
  });

  it("moss test prints an expected failure as a pass and an unmet one with its reason; exits 1", async () => {
    const module = join(directory, "cli-errors.ts");
    await writeFile(
      module,
      `export function boom(): never {
  throw new Error("boom");
}
export const __moss_test_cases__ = [
  { name: "boom is an error", code: "function main() { boom(); }", expectError: { kind: "runtime", message: "boom" } },
  { name: "quiet is no error", code: "function main() { return 2; }", expectError: "runtime" },
];
`,
    );
    const lines: string[] = [];
    const stdout = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const code = await main(["test", module], {
      stdout,
      stderr: stdout,
      stdin: Readable.from([]),
      env: { NO_COLOR: "1" },
      cwd: process.cwd(),
    });
    const output = lines.join("");
    expect(code).toBe(1);
    expect(output).toMatch(/✓ boom is an error \(expects a runtime error\)/);
    expect(output).toContain("failed as expected with a runtime error: boom");
    expect(output).toMatch(/✗ quiet is no error \(expects a runtime error\)/);
    expect(output).toContain("expected a runtime error, but the code ran without error (returned 2)");
    expect(output).toContain("1 passed, 1 failed");
  });

  it("the CLI page's __moss_test_cases__ example runs as documented on the sphero module", async () => {
    const readme = await readFile("docs/03-cli.md", "utf8");
    const start = readme.indexOf('export const __moss_test_cases__ = [\n  "testSquare"');
    expect(start).toBeGreaterThan(-1);
    const cases = readme.slice(start, readme.indexOf("\n];", start) + 3);
    // The page says the block is in examples/sphero/context.ts: it is, word for word, and runs as shown.
    const source = await readFile("examples/sphero/context.ts", "utf8");
    expect(source).toContain(cases);
    const report = await new MossTestSuite().runModuleTests("examples/sphero/context.ts");
    expect(report.results.map((result) => [result.name, result.ok])).toEqual([
      ["testSquare", true],
      ["remembers a shape", true],
      ["a too-fast roll is refused", true],
      ["a typo does not type-check", true],
    ]);
  });
});
