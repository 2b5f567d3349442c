import { cp, readdir } from "node:fs/promises";
import { inject } from "vitest";

/**
 * Makes `directory` a fresh embedded database for a test: a copy of the run's template (an empty database with the
 * server's schema, made once by `pglite-template-setup.ts`), so each test has a database of its own without paying
 * PGlite's initdb. `directory` must be missing or empty. Resolves the directory, as a `DatabaseLocation` names it.
 */
export async function freshPGliteDirectory(directory: string): Promise<string> {
  const template = inject("pgliteTemplate");
  if (template === undefined) return directory;
  const present = await readdir(directory).catch(() => []);
  if (present.length > 0) throw new Error(`freshPGliteDirectory: ${directory} is not empty`);
  await cp(template, directory, { recursive: true, errorOnExist: true, force: false });
  return directory;
}
