import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { openDatabase } from "../../engine/server/store/index.ts";

/*
 * vitest globalSetup: one embedded database (PGlite) made once for the whole run, with the server's migrations
 * applied and then closed, its directory given to the test files as `inject("pgliteTemplate")`. A test's fresh
 * database is a copy of it (`freshPGliteDirectory`): PGlite's initdb costs about 4 s of CPU on an idle machine (far
 * more beside other test files), a copy and an open under 1 s. Tests of a database made from nothing (a new
 * `--data-dir`, a directory that is not a database) do not use it.
 */

declare module "vitest" {
  export interface ProvidedContext {
    /** A closed PGlite data directory with the server's schema, to copy; undefined if it could not be made. */
    pgliteTemplate: string | undefined;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const directory = await mkdtemp(join(tmpdir(), "moss-pglite-template-"));
  const template = join(directory, "data");
  const database = await openDatabase({ dataDirectory: template });
  await database.close();
  project.provide("pgliteTemplate", template);
  return () => rm(directory, { recursive: true, force: true });
}
