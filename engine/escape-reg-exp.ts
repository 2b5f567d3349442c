// One rule for putting literal text (a path, a name, a package specifier) inside a regular expression.

/**
 * `text` with every character a `RegExp` pattern reads as syntax escaped (`/` too, so the result is also safe in a
 * literal), for a pattern that must match the text itself. Valid with and without the `u` flag.
 */
export function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
}
