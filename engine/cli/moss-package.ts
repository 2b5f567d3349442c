// Where moss-ts's own package.json is, from this file's folder: `engine/cli/` in the sources, `dist/engine/cli/` in
// the published package.
import { createHash } from "node:crypto";
import { type Dirent, readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { typeScriptFile } from "../enable-code-cache.ts";

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** The folder holding moss-ts's `engine/` (and `container/`): the repository in the sources, `dist/` when installed. */
export const MOSS_CODE_ROOT = path.resolve(HERE, "..", "..");

/** moss-ts's package.json: the first one named `moss-ts` above the code root (or at it); undefined if none. */
export function mossPackageFile(): string | undefined {
  for (const folder of [MOSS_CODE_ROOT, path.dirname(MOSS_CODE_ROOT)]) {
    const file = path.join(folder, "package.json");
    try {
      if ((JSON.parse(readFileSync(file, "utf8")) as { name?: unknown }).name === "moss-ts") return file;
    } catch {}
  }
  return undefined;
}

/** moss-ts's version, or "unknown" when its package.json cannot be read. */
export function mossPackageVersion(): string {
  const file = mossPackageFile();
  if (file === undefined) return "unknown";
  const version = (JSON.parse(readFileSync(file, "utf8")) as { version?: unknown }).version;
  return typeof version === "string" ? version : "unknown";
}

/** moss-ts's own code folders, whose every file (by size and time) is part of its identity. */
export const MOSS_CODE_FOLDERS = ["engine", "container", "moss-modules"].map((folder) =>
  path.join(MOSS_CODE_ROOT, folder),
);

/**
 * What identifies the moss-ts a process runs: its package.json and every file of its code folders (source maps and
 * declarations included), and the TypeScript and ts-morph it loads, each by size and time. One rule for the kept
 * results' keys (result-cache.ts) and the warm path's daemon (daemon-client.ts): a change to any of them is another
 * moss-ts to both. Computed once per process (walking the files costs ~10 ms): a process runs one moss-ts, and a warm
 * process of the daemon serves only commands whose client found this same identity (it names the daemon's socket).
 */
export function mossCodeIdentity(): string {
  identity ??= computeCodeIdentity();
  return identity;
}

let identity: string | undefined;

function computeCodeIdentity(): string {
  const digest = createHash("sha256");
  const add = (file: string): void => {
    try {
      const found = statSync(file);
      digest.update(`${file}\0${found.size}\0${found.mtimeMs}\n`);
    } catch {
      digest.update(`${file}\0absent\n`);
    }
  };
  const packageFile = mossPackageFile();
  if (packageFile !== undefined) add(packageFile);
  // A folder's entries tell which are folders: each file is stat'ed once (a stat per entry first cost ~6 ms more).
  const walk = (folder: string): void => {
    let entries: Dirent[];
    try {
      entries = readdirSync(folder, { withFileTypes: true });
    } catch {
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (entry.name === "node_modules") continue;
      const file = path.join(folder, entry.name);
      const isFolder = entry.isSymbolicLink() ? statSync(file).isDirectory() : entry.isDirectory();
      if (isFolder) walk(file);
      else add(file);
    }
  };
  for (const folder of MOSS_CODE_FOLDERS) walk(folder);
  try {
    add(createRequire(import.meta.url).resolve("ts-morph"));
    add(typeScriptFile());
  } catch {}
  return digest.digest("base64url");
}
