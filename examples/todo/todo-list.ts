// A todo list, the everyday system this example drives. `TodoList` is the service the model uses; the host
// decides where the items live (a JSON file by default, so the list outlives every session).

/** One item of the list. */
export interface TodoItem {
  /** Stable number, never reused. */
  id: number;
  title: string;
  done: boolean;
  /** Due date as `YYYY-MM-DD`, when there is one. */
  due?: string;
  /** Free labels such as `"home"` or `"work"`. */
  tags: string[];
}

/** Which items `list` returns; every given condition must hold. */
export interface TodoFilter {
  done?: boolean;
  tag?: string;
  /** Items due on or before this `YYYY-MM-DD` date. */
  dueBy?: string;
}

/** The user's todo list. Changes are saved at once and seen by the user's other apps. */
export abstract class TodoList {
  /** Adds an item (not done) and returns it with its new id. */
  abstract add(title: string, options?: { due?: string; tags?: string[] }): Promise<TodoItem>;

  /** The items matching `filter` (all items without one), oldest first. */
  abstract list(filter?: TodoFilter): Promise<TodoItem[]>;

  /** Marks an item done and returns it; throws when no item has this id. */
  abstract complete(id: number): Promise<TodoItem>;

  /** Changes an item's title, due date or tags and returns it; throws when no item has this id. */
  abstract update(
    id: number,
    changes: { title?: string; due?: string | null; tags?: string[] },
  ): Promise<TodoItem>;

  /** Deletes an item; throws when no item has this id. */
  abstract remove(id: number): Promise<void>;
}
