import { Moss as Parent } from "moss-ts";
import type { TodoItem } from "./todo-list.ts";
import { TodoList } from "./todo-list.ts";

/**
 * You manage the user's todo list through `moss.todos`. The list itself is saved by the service; the data
 * fields below are your own memory and are kept between sessions. When a request is ambiguous (two open items
 * match "report"), do not guess: ask the user with `moss.ask("Which one?", { choices })`; the run waits for the
 * answer and goes on with it.
 */
export class Moss extends Parent {
  /** The user's todo list. */
  todos!: TodoList;
  /** What you learned about how the user likes the list kept (e.g. "tag errands with 'home'"). */
  preferences: string[] = [];
  /** When you last reviewed the list with the user, or null if never. */
  lastReview: Date | null = null;
}

/** Groups items by tag; untagged items are under `"(none)"`. */
export function byTag(items: TodoItem[]): Record<string, TodoItem[]> {
  const groups: Record<string, TodoItem[]> = {};
  for (const item of items) {
    for (const tag of item.tags.length > 0 ? item.tags : ["(none)"]) (groups[tag] ??= []).push(item);
  }
  return groups;
}

/** Today's date as `YYYY-MM-DD`. */
export function today(): string {
  return new Date().toISOString().slice(0, 10);
}

// <moss-hide>
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { MossCompiler } from "moss-ts";
import { JsonFileTodoList } from "./json-file-todo-list.ts";

/** The test cases' lists live in one temporary folder of this process, removed when the process exits. */
let testFolder: string | undefined;
function testListPath(): string {
  if (testFolder === undefined) {
    const folder = mkdtempSync(join(tmpdir(), "moss-todo-test-"));
    process.once("exit", () => rmSync(folder, { recursive: true, force: true }));
    testFolder = folder;
  }
  return join(mkdtempSync(join(testFolder, "case-")), "todo.json");
}

/** `moss test` and MossTestSuite bind this instead of the host setup: each test case gets a fresh, empty list. */
export function __moss_test_setup__(compiler: MossCompiler): void {
  compiler.bind(TodoList, new JsonFileTodoList(testListPath()));
}

export function __moss_compile__(compiler: MossCompiler): void {
  if (!compiler.container().bound(TodoList)) {
    throw new Error("bind a TodoList before compiling examples/todo/context.ts (see context.host.ts)");
  }
}

export function __moss_attr_prompts__(): Iterable<[string, string | null]> {
  return [["Parent", ""]];
}

/** Test cases `moss test` runs, each in its own runtime. */
export const __moss_test_cases__ = [
  "testAddTagComplete",
  {
    name: "remembers a preference",
    code: "async function main(moss: Moss) {\n  moss.preferences.push('short titles');\n  return moss.preferences;\n}",
  },
];

export async function testAddTagComplete(moss: Moss): Promise<string[]> {
  const milk = await moss.todos.add("buy milk", { tags: ["home"] });
  await moss.todos.add("send report", { tags: ["work"], due: "2030-01-31" });
  await moss.todos.complete(milk.id);
  const open = await moss.todos.list({ done: false });
  return Object.keys(byTag(open));
}
// </moss-hide>
