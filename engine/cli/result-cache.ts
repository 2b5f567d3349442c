// Results of CLI commands kept between runs (`moss check`'s diagnostics, `moss prompt`'s prompt): a repeated command
// on unchanged inputs answers without loading TypeScript or the module. An entry is found by what the command was
// given (the key: command, module, its input, working directory, environment, Node, moss-ts) and used only while
// every path the command read (see read-tracker.ts) is as it was, with the package.json and tsconfig.json files
// that govern how each was compiled and loaded. Entries live in this user's private temp folder.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { readdir, rm, stat } from "node:fs/promises";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import { privateTempFolder, touchPrivateFile, writePrivateFile } from "../private-temp-folder.ts";
import { MOSS_CODE_FOLDERS, mossCodeIdentity } from "./moss-package.ts";
import type { KeptWarning, ReadKind } from "./read-tracker.ts";

const FORMAT = 2;
/** Entries kept; the least recently written go first. */
const MAX_ENTRIES = 256;
/** The files beside a module (and in each folder above it) that decide how it is compiled and loaded. */
const GOVERNING_FILES = ["package.json", "tsconfig.json"];

/** What one command was given: the key of its kept result. */
export interface ResultCacheKey {
  /** The entry's file, named by a hash of the inputs. */
  file: string;
}

/** A kept result and the warnings Node printed while it was made. */
export interface KeptResult<T> {
  result: T;
  warnings: KeptWarning[];
}

interface Entry {
  format: number;
  /** Every path the command read, how, and what it was: a content hash, "dir", a listing's hash, or null (absent). */
  reads: Array<[file: string, kind: ReadKind, signature: string | null]>;
  result: unknown;
  warnings: KeptWarning[];
}

/**
 * The key of `command` run on the module at `modulePath` with `input` (the code, the options that change the
 * result): also the working directory, the whole environment (a module's hooks and its host setup may read any of
 * it), Node's version, flags and platform, and moss-ts's own version and files (and TypeScript's).
 */
export function resultCacheKey(
  command: string,
  modulePath: string,
  input: unknown,
  cwd: string,
  env: NodeJS.ProcessEnv,
): ResultCacheKey {
  const inputs = JSON.stringify([
    FORMAT,
    command,
    mossCodeIdentity(),
    process.version,
    process.platform,
    process.arch,
    process.execArgv,
    path.resolve(cwd, modulePath),
    cwd,
    input,
    Object.entries(env).sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0)),
  ]);
  const name = createHash("sha256").update(inputs).digest("base64url");
  return { file: path.join(privateTempFolder(), "result-cache", `${name}.json`) };
}

/** The kept result of this command, if every path it read is as it was then. */
export async function readCachedResult<T>(key: ResultCacheKey): Promise<KeptResult<T> | undefined> {
  let entry: Entry;
  try {
    entry = JSON.parse(readFileSync(key.file, "utf8")) as Entry;
  } catch {
    return undefined;
  }
  if (entry.format !== FORMAT || !Array.isArray(entry.reads)) return undefined;
  for (const [file, kind, signature] of entry.reads) {
    if (signatureOf(file, kind) !== signature) return undefined;
  }
  touchPrivateFile(key.file);
  return { result: entry.result as T, warnings: Array.isArray(entry.warnings) ? entry.warnings : [] };
}

/**
 * Keeps `result` of a command that read `reads` (a path that did not exist is kept as absent: creating it is a
 * change), with the package.json and tsconfig.json of each folder above each file it read. Nothing is kept if a path
 * changed after `startedAtMs` (the command may have read its older state).
 */
export async function writeCachedResult(
  key: ResultCacheKey,
  reads: ReadonlyMap<string, ReadKind>,
  startedAtMs: number,
  result: unknown,
  warnings: readonly KeptWarning[] = [],
): Promise<void> {
  try {
    const all = new Map<string, ReadKind>();
    const skipped = [privateTempFolder(), transformCacheFolder(), ...MOSS_CODE_FOLDERS];
    for (const [file, kind] of reads) {
      if (skipped.some((folder) => file === folder || file.startsWith(`${folder}${path.sep}`))) continue;
      if (all.get(file) !== "listing") all.set(file, kind);
      for (const governing of governingFiles(file)) if (!all.has(governing)) all.set(governing, "content");
    }
    const sorted = [...all].sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0));
    const entry: Entry = { format: FORMAT, reads: [], result, warnings: [...warnings] };
    for (const [file, kind] of sorted) {
      const modified = await stat(file).then(
        (found) => (found.isDirectory() && kind === "content" ? 0 : found.mtimeMs),
        () => 0,
      );
      if (modified >= startedAtMs) return;
      entry.reads.push([file, kind, signatureOf(file, kind)]);
    }
    writePrivateFile(key.file, JSON.stringify(entry));
    await dropOldEntries(path.dirname(key.file));
  } catch {
    // A result that could not be kept is computed again next time.
  }
}

/**
 * The files that decide how `file` compiles and loads: outside node_modules, the package.json and tsconfig.json of
 * its folder and of each folder above it; inside, its package's package.json (whose version names its code).
 */
function governingFiles(file: string): string[] {
  const parts = file.split(path.sep);
  const index = parts.lastIndexOf("node_modules");
  if (index >= 0) {
    if (index + 1 >= parts.length) return [];
    const length = parts[index + 1]!.startsWith("@") ? 3 : 2;
    return [[...parts.slice(0, index + 1 + length), "package.json"].join(path.sep)];
  }
  const files: string[] = [];
  for (let folder = path.dirname(file); ; folder = path.dirname(folder)) {
    for (const name of GOVERNING_FILES) files.push(path.join(folder, name));
    if (path.dirname(folder) === folder) return files;
  }
}

/**
 * What a path is now: for `content`, a hash of a file's bytes (of its size and time inside node_modules, whose
 * packages are named by their package.json), "dir" for a folder; for `listing`, a hash of the folder's names; null
 * when absent.
 */
function signatureOf(file: string, kind: ReadKind): string | null {
  try {
    const found = statSync(file);
    if (kind === "listing") {
      if (!found.isDirectory()) return `file:${found.size}:${found.mtimeMs}`;
      return `list:${hash(readdirSync(file).sort().join("\0"))}`;
    }
    if (found.isDirectory()) return "dir";
    if (file.includes(`${path.sep}node_modules${path.sep}`)) return `stat:${found.size}:${found.mtimeMs}`;
    return hash(readFileSync(file));
  } catch {
    return null;
  }
}

function hash(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("base64url");
}

/**
 * tsx's cache of transformed files (`<temp>/tsx-<euid>`, named as tsx names it): keyed by each source's content, so
 * what it holds never changes a result, and it is written while a command runs. On Node 24 and 26 tsx reads that
 * cache in the main thread (on Node 20 in its loader thread), where the read tracker sees it: kept as inputs, those
 * files were newer than the command's start and nothing was ever kept (CI's Node 24 and 26 runs).
 */
function transformCacheFolder(): string {
  return path.join(tmpdir(), `tsx-${process.geteuid?.() ?? userInfo().username}`);
}

async function dropOldEntries(folder: string): Promise<void> {
  const names = (await readdir(folder)).filter((name) => name.endsWith(".json"));
  if (names.length <= MAX_ENTRIES) return;
  const dated = await Promise.all(
    names.map(async (name) => ({
      file: path.join(folder, name),
      modified: await stat(path.join(folder, name)).then(
        (found) => found.mtimeMs,
        () => 0,
      ),
    })),
  );
  dated.sort((left, right) => left.modified - right.modified);
  for (const { file } of dated.slice(0, dated.length - MAX_ENTRIES)) await rm(file, { force: true });
}
