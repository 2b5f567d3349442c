import { Moss as Parent } from "moss-ts";

/** One note you wrote. */
export interface Note {
  /** What you wrote. */
  text: string;
  /** Words to find the note by later, lower case. */
  tags: string[];
  /** When you wrote it. */
  at: Date;
}

/** Tells the time. Use it instead of `new Date()` so tests can fix the time. */
export interface Clock {
  /** The current time. */
  now(): Date;
}

/**
 * Your notebook. Everything you put in `moss.notes` and `moss.facts` is still there on your next turn,
 * even in a new process: use it to remember what you learned and what is left to do.
 */
export class Moss extends Parent {
  /** The clock. */
  clock!: Clock;
  /** Your notes, oldest first. Add with `moss.notes.push({ text, tags, at: moss.clock.now() })`. */
  notes: Note[] = [];
  /** Short facts by name, e.g. `moss.facts["user.name"] = "Ada"`. */
  facts: Record<string, string> = {};
}

/** The notes that carry every one of `tags`, newest first. */
export function findNotes(notes: Note[], ...tags: string[]): Note[] {
  const wanted = tags.map((tag) => tag.toLowerCase());
  return notes.filter((note) => wanted.every((tag) => note.tags.includes(tag))).reverse();
}

// <moss-hide>
import type { MossCompiler } from "moss-ts";

/** The system clock, unless the host bound its own `Clock`. */
export function __moss_compile__(compiler: MossCompiler): void {
  if (!compiler.container().bound("Clock")) compiler.bind<Clock>("Clock", { now: () => new Date() });
}
// </moss-hide>
