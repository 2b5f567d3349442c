// `moss check`'s results kept between runs: a repeated check of unchanged files answers without loading TypeScript.
// An entry is found by what the command was given and checked against the content of every file the check read.
import { createHash } from "node:crypto";
import { readdirSync, statSync } from "node:fs";
import { readdir, readFile, rm, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { MOSS_DIAGNOSTIC_CODES } from "../check/diagnostic-codes.ts";
import { typeScriptFile } from "../enable-code-cache.ts";
import { privateTempFolder, touchPrivateFile, writePrivateFile } from "../private-temp-folder.ts";
import type { Diagnostic } from "../types.ts";
import { MOSS_CODE_ROOT, mossPackageFile } from "./moss-package.ts";

const FORMAT = 1;
/** Findings that say the code was not checked (a limit under this machine's load, a checker failure): never kept. */
const UNCHECKED_CODES = new Set<number>([
  MOSS_DIAGNOSTIC_CODES.checkLimit,
  MOSS_DIAGNOSTIC_CODES.checkerFailed,
]);
/** Entries kept; the least recently written go first. */
const MAX_ENTRIES = 256;
/** moss-ts's own code folders (under MOSS_CODE_ROOT), whose every file (by size and time) is part of each key. */
const LIBRARY_FOLDERS = ["engine", "container"];
const require = createRequire(import.meta.url);

/** What one `moss check` was given: the key of its cached result. */
export interface CheckCacheKey {
  /** The entry's file, named by a hash of the inputs below. */
  file: string;
}

interface Entry {
  format: number;
  /** Every file the check read (each context module import, `.d.ts` and package.json), with its content's hash. */
  files: Array<[file: string, hash: string | null]>;
  diagnostics: Diagnostic[];
}

let library: string | undefined;

/**
 * The key of a check of `code` against the module at `modulePath`: the module's absolute path, the code, the working
 * directory, the environment (the module's hooks may read it), Node's version, TypeScript's and moss-ts's own files.
 */
export function checkCacheKey(
  modulePath: string,
  code: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
): CheckCacheKey {
  library ??= libraryIdentity();
  const inputs = JSON.stringify([
    FORMAT,
    library,
    process.version,
    path.resolve(cwd, modulePath),
    cwd,
    code,
    Object.entries(env).sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0)),
  ]);
  const name = createHash("sha256").update(inputs).digest("base64url");
  return { file: path.join(privateTempFolder(), "check-cache", `${name}.json`) };
}

/** The cached diagnostics of this check, if every file it read is as it was then. */
export async function readCachedCheck(key: CheckCacheKey): Promise<Diagnostic[] | undefined> {
  let entry: Entry;
  try {
    entry = JSON.parse(await readFile(key.file, "utf8")) as Entry;
  } catch {
    return undefined;
  }
  if (entry.format !== FORMAT || !Array.isArray(entry.files) || !Array.isArray(entry.diagnostics))
    return undefined;
  const current = await Promise.all(entry.files.map(([file]) => contentHash(file)));
  if (!entry.files.every(([, hash], index) => current[index] === hash)) return undefined;
  touchPrivateFile(key.file);
  return entry.diagnostics;
}

/**
 * Keeps the diagnostics of a check that read `files` (a file that did not exist is kept as absent: creating it
 * is a change). Nothing is kept if a file changed after `startedAtMs` (the check may have read its older text) or
 * if the code was not checked (a limit or a checker failure).
 */
export async function writeCachedCheck(
  key: CheckCacheKey,
  files: string[],
  startedAtMs: number,
  diagnostics: Diagnostic[],
): Promise<void> {
  if (diagnostics.some((diagnostic) => UNCHECKED_CODES.has(diagnostic.code))) return;
  try {
    const all = new Set(files);
    for (const file of files) {
      const manifest = packageManifest(file);
      if (manifest !== undefined) all.add(manifest);
    }
    const sorted = [...all].sort();
    for (const file of sorted) {
      const modified = await stat(file).then(
        (found) => found.mtimeMs,
        () => 0,
      );
      if (modified >= startedAtMs) return;
    }
    const entry: Entry = {
      format: FORMAT,
      files: await Promise.all(
        sorted.map(async (file) => [file, await contentHash(file)] as [string, string | null]),
      ),
      diagnostics,
    };
    writePrivateFile(key.file, JSON.stringify(entry));
    await dropOldEntries(path.dirname(key.file));
  } catch {
    // A result that could not be kept is checked again next time.
  }
}

/** The package.json of the package a node_modules file belongs to (its version names the package's code). */
function packageManifest(file: string): string | undefined {
  const parts = file.split(path.sep);
  const index = parts.lastIndexOf("node_modules");
  if (index < 0 || index + 1 >= parts.length) return undefined;
  const length = parts[index + 1]!.startsWith("@") ? 3 : 2;
  return [...parts.slice(0, index + 1 + length), "package.json"].join(path.sep);
}

async function contentHash(file: string): Promise<string | null> {
  try {
    return createHash("sha256")
      .update(await readFile(file))
      .digest("base64url");
  } catch {
    return null;
  }
}

/** moss-ts's version, each of its code files by size and modification time, and TypeScript's file the same way. */
function libraryIdentity(): string {
  const hash = createHash("sha256");
  const add = (file: string): void => {
    try {
      const found = statSync(file);
      hash.update(`${file}\0${found.size}\0${found.mtimeMs}\n`);
    } catch {
      hash.update(`${file}\0absent\n`);
    }
  };
  const packageFile = mossPackageFile();
  if (packageFile !== undefined) add(packageFile);
  const walk = (folder: string): void => {
    let names: string[];
    try {
      names = readdirSync(folder).sort();
    } catch {
      return;
    }
    for (const name of names) {
      if (name === "node_modules") continue;
      const file = path.join(folder, name);
      if (statSync(file).isDirectory()) walk(file);
      else add(file);
    }
  };
  for (const folder of LIBRARY_FOLDERS) walk(path.join(MOSS_CODE_ROOT, folder));
  try {
    add(require.resolve("ts-morph"));
    add(typeScriptFile());
  } catch {}
  return hash.digest("base64url");
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
