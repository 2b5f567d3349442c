import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MossTestSuite } from "../../engine/agent/moss-test-suite.ts";
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
});
