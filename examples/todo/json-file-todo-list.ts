import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { type TodoFilter, type TodoItem, TodoList } from "./todo-list.ts";

interface TodoDocument {
  nextId: number;
  items: TodoItem[];
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** A TodoList kept in a JSON file, rewritten atomically after every change. */
export class JsonFileTodoList extends TodoList {
  readonly path: string;

  constructor(path: string) {
    super();
    this.path = path;
  }

  async add(title: string, options: { due?: string; tags?: string[] } = {}): Promise<TodoItem> {
    if (typeof title !== "string" || title.trim() === "")
      throw new TypeError("add() needs a non-empty title");
    if (options.due !== undefined) checkDate(options.due);
    return this.#change((document) => {
      const item: TodoItem = {
        id: document.nextId++,
        title: title.trim(),
        done: false,
        ...(options.due === undefined ? {} : { due: options.due }),
        tags: [...(options.tags ?? [])],
      };
      document.items.push(item);
      return item;
    });
  }

  async list(filter: TodoFilter = {}): Promise<TodoItem[]> {
    if (filter.dueBy !== undefined) checkDate(filter.dueBy);
    const { items } = await this.#read();
    return items.filter(
      (item) =>
        (filter.done === undefined || item.done === filter.done) &&
        (filter.tag === undefined || item.tags.includes(filter.tag)) &&
        (filter.dueBy === undefined || (item.due !== undefined && item.due <= filter.dueBy)),
    );
  }

  async complete(id: number): Promise<TodoItem> {
    return this.#change((document) => {
      const item = find(document, id);
      item.done = true;
      return { ...item };
    });
  }

  async update(
    id: number,
    changes: { title?: string; due?: string | null; tags?: string[] },
  ): Promise<TodoItem> {
    if (changes.due !== undefined && changes.due !== null) checkDate(changes.due);
    return this.#change((document) => {
      const item = find(document, id);
      if (changes.title !== undefined) item.title = changes.title;
      if (changes.due === null) delete item.due;
      else if (changes.due !== undefined) item.due = changes.due;
      if (changes.tags !== undefined) item.tags = [...changes.tags];
      return { ...item };
    });
  }

  async remove(id: number): Promise<void> {
    await this.#change((document) => {
      find(document, id);
      document.items = document.items.filter((item) => item.id !== id);
    });
  }

  async #read(): Promise<TodoDocument> {
    try {
      return JSON.parse(await readFile(this.path, "utf8")) as TodoDocument;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return { nextId: 1, items: [] };
      throw error;
    }
  }

  async #change<T>(edit: (document: TodoDocument) => T): Promise<T> {
    const document = await this.#read();
    const result = edit(document);
    await mkdir(dirname(this.path), { recursive: true });
    const temporary = `${this.path}.${process.pid}.tmp`;
    await writeFile(temporary, `${JSON.stringify(document, null, 2)}\n`, "utf8");
    await rename(temporary, this.path);
    return result;
  }
}

function find(document: TodoDocument, id: number): TodoItem {
  const item = document.items.find((candidate) => candidate.id === id);
  if (item === undefined) throw new RangeError(`no todo item has id ${id}`);
  return item;
}

function checkDate(date: string): void {
  if (typeof date !== "string" || !DATE.test(date))
    throw new RangeError(`dates are YYYY-MM-DD, got ${JSON.stringify(date)}`);
}
