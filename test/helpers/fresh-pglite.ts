import { cp, readdir, rmdir } from "node:fs/promises";
import { inject } from "vitest";

/**
 * Makes `directory` a fresh embedded database for a test: a copy of the run's template (an empty database with the
 * server's schema, made once by `pglite-template-setup.ts`), so each test has a database of its own without paying
 * PGlite's initdb. `directory` must be missing or empty. Resolves the directory, as a `DatabaseLocation` names it.
 */
export async function freshPGliteDirectory(directory: string): Promise<string> {
  const template = inject("pgliteTemplate");
  if (template === undefined) return directory;
  const present = await readdir(directory).catch(() => undefined);
  if (present !== undefined && present.length > 0)
    throw new Error(`freshPGliteDirectory: ${directory} is not empty`);
  // Copied to a new directory: onto an existing one, fs.cp merges on Node 20 but refuses (EEXIST) on Node 24.
  if (present !== undefined) await rmdir(directory);
  await cp(template, directory, { recursive: true });
  return directory;
}
