import { randomBytes } from "node:crypto";
import { link, mkdir, open, readFile, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { locatedMessage, MossError } from "../errors.ts";
import type { MossContext } from "../types.ts";
import { jsonErrorOffset } from "./json-error-offset.ts";
import { validateContext } from "./validate-context.ts";

const MAX_FRAME_LINE_LENGTH = 300;

/** What a write did besides writing: where a corrupt file it replaced was moved to. */
export interface WriteContextReport {
  path: string;
  /** Set when the file being replaced was corrupt: it was moved here first, never overwritten. */
  movedCorruptTo?: string;
}

/**
 * Reads a MossContext file; `undefined` when the file does not exist. Bad JSON or an invalid shape throws
 * MossError `context-corrupt` naming the file and, for JSON, the line and column of the error.
 */
export async function readContextFile(path: string): Promise<MossContext | undefined> {
  let text: string | undefined;
  try {
    text = await readTextIfExists(path);
  } catch (error) {
    throw fileError("context-read", path, "cannot read the MossContext file", error);
  }
  return text === undefined ? undefined : parseContextText(text, path);
}

/**
 * Writes a MossContext file atomically (temp file in the same directory, fsync, rename, fsync of the directory),
 * so a reader or a crash sees the old file or the new one, never a part. A corrupt file at `path` is not
 * overwritten: it is moved aside to `<name>.corrupt-<timestamp>.json` first. Invalid contexts are refused. A file
 * that already holds exactly this document is left as it is (nothing new: no write, no fsync).
 */
export async function writeContextFile(path: string, context: MossContext): Promise<WriteContextReport> {
  const valid = validateContext(context);
  const text = `${JSON.stringify(valid, null, 2)}\n`;
  try {
    await mkdir(dirname(path), { recursive: true });
    const existing = await readTextIfExists(path);
    if (existing === text) return { path };
    const movedCorruptTo = existing === undefined ? undefined : await moveAsideIfCorrupt(path, existing);
    await writeFileAtomically(path, text);
    return movedCorruptTo === undefined ? { path } : { path, movedCorruptTo };
  } catch (error) {
    if (MossError.is(error)) throw error;
    throw fileError("context-write", path, "cannot write the MossContext file", error);
  }
}

/** A file-system failure on a context file as a MossError naming the file and the cause (`EACCES: permission denied`). */
function fileError(
  code: "context-read" | "context-write",
  path: string,
  what: string,
  error: unknown,
): MossError {
  const errno = error as NodeJS.ErrnoException;
  const reason =
    errno.code === undefined
      ? String(errno.message ?? error)
      : `${errno.code}: ${errno.message.replace(/^[A-Z]+: /, "").replace(/, \w+ '.*'$/, "")}${errno.path !== undefined && errno.path !== path ? ` (${errno.syscall ?? "at"} ${errno.path})` : ""}`;
  return new MossError(
    code,
    `${path}: ${what} (${reason})`,
    { file: path, errno: errno.code },
    { cause: error },
  );
}

/** Parses the text of a MossContext file, throwing MossError `context-corrupt` naming the file when it is not one. */
export function parseContextText(text: string, file: string): MossContext {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    // Node 22+ appends " (line L column C)" to V8's message; the message names the line and column itself.
    const reason = (error instanceof Error ? error.message : String(error)).replace(
      / \(line \d+ column \d+\)$/,
      "",
    );
    const offset = jsonErrorOffset(text) ?? text.length;
    const { line, column } = lineAndColumn(text, offset);
    const lineText = text.split(/\r?\n/)[line - 1] ?? "";
    const source = lineText.length <= MAX_FRAME_LINE_LENGTH ? text : undefined;
    throw new MossError(
      "context-corrupt",
      locatedMessage(
        file,
        source,
        line,
        column,
        `corrupt MossContext file, invalid JSON at line ${line}, column ${column}: ${reason}`,
      ),
      { file, line, column, offset },
      { cause: error },
    );
  }
  try {
    return validateContext(json, file);
  } catch (error) {
    const problems = MossError.is(error) ? (error.details.problems as string[]) : [String(error)];
    throw new MossError(
      "context-corrupt",
      `${file} - corrupt MossContext file: ${problems.join("; ")}`,
      { file, problems },
      { cause: error },
    );
  }
}

/** Writes `text` to `path` through a temp file in the same directory, fsync and rename. */
export async function writeFileAtomically(path: string, text: string): Promise<void> {
  const directory = dirname(path);
  const temporary = join(
    directory,
    `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`,
  );
  const handle = await open(temporary, "wx");
  try {
    try {
      await handle.writeFile(text, "utf8");
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, path);
  } catch (error) {
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
  await syncDirectory(directory);
}

/**
 * Moves a corrupt file at `path` to `<name>.corrupt-<timestamp>.json` (never replacing anything); returns the new
 * path. `text`: the file's text when the caller has just read it.
 */
export async function moveAsideIfCorrupt(
  path: string,
  text: string | undefined = undefined,
): Promise<string | undefined> {
  text ??= await readTextIfExists(path);
  if (text === undefined) return undefined;
  try {
    parseContextText(text, path);
    return undefined;
  } catch (error) {
    if (!MossError.is(error, "context-corrupt")) throw error;
  }
  const stem = path.endsWith(".json") ? path.slice(0, -".json".length) : path;
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  for (let attempt = 0; ; attempt++) {
    const target = `${stem}.corrupt-${stamp}${attempt === 0 ? "" : `-${attempt}`}.json`;
    try {
      await link(path, target);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") continue;
      throw error;
    }
    await unlink(path);
    await syncDirectory(dirname(path));
    return target;
  }
}

async function syncDirectory(directory: string): Promise<void> {
  const handle = await open(directory, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let index = 0; index < offset && index < text.length; index++) {
    if (text[index] === "\n") {
      line++;
      lineStart = index + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

/** A file's text, or undefined when it does not exist; other read errors are thrown. */
export async function readTextIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ENOTDIR: a folder on the path is a file, so the file cannot exist either.
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw error;
  }
}
