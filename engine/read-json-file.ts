// One rule for reading a JSON file: its text read and parsed, or the caller's own error saying which of the two
// failed. Each caller names the file in its own words and with its own error code; the reading and parsing are here.

import { readFile } from "node:fs/promises";

/** Why a JSON text could not be taken: the file could not be read (`error.code` is the errno), or it is not JSON. */
export type JsonFileProblem =
  | { kind: "unreadable"; error: NodeJS.ErrnoException }
  | { kind: "invalid"; error: Error };

/**
 * The parsed JSON of `file`. On a problem, throws the error `fail` returns; when `fail` returns nothing (a file that
 * may not exist yet), the result is undefined.
 */
export async function readJsonFile(
  file: string,
  fail: (problem: JsonFileProblem) => Error | undefined,
): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    const thrown = fail({ kind: "unreadable", error: error as NodeJS.ErrnoException });
    if (thrown === undefined) return undefined;
    throw thrown;
  }
  return parseJsonText(text, (error) => fail({ kind: "invalid", error }));
}

/** The parsed JSON of a text already read; throws the error `fail` returns when it is not valid JSON. */
export function parseJsonText(text: string, fail: (error: Error) => Error | undefined): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    const thrown = fail(error instanceof Error ? error : new SyntaxError(String(error)));
    if (thrown === undefined) return undefined;
    throw thrown;
  }
}
