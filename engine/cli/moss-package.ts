// Where moss-ts's own package.json is, from this file's folder: `engine/cli/` in the sources, `dist/engine/cli/` in
// the published package.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

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
