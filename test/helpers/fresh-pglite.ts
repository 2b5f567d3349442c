import { cp, mkdtemp, readdir, rm, rmdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

/**
 * A suite's fresh embedded database in a new temp folder named by `prefix`: its location, and `end` removing the
 * folder (the shape the server suites' `suite("PGlite", …)` take).
 */
export async function pgliteSuiteDatabase(
  prefix: string,
): Promise<{ location: { dataDirectory: string }; end: () => Promise<void> }> {
  const directory = await mkdtemp(join(tmpdir(), prefix));
  return {
    location: { dataDirectory: await freshPGliteDirectory(directory) },
    end: () => rm(directory, { recursive: true, force: true }),
  };
}
