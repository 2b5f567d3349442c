import { resolve } from "node:path";
import type { MossCompiler } from "moss-ts";
import { JsonFileTodoList } from "./json-file-todo-list.ts";
import { TodoList } from "./todo-list.ts";

/** Host setup used by `moss agent`, `moss serve` and `moss test --host`: the list lives in `$MOSS_TODO_FILE` or `.moss/todo.json`. */
export function setup(compiler: MossCompiler): void {
  const file = resolve(process.env.MOSS_TODO_FILE ?? ".moss/todo.json");
  if (!compiler.container().bound(TodoList)) compiler.bind(TodoList, new JsonFileTodoList(file));
}
