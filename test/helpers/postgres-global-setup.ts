import type { TestProject } from "vitest/node";
import { POSTGRES_TESTS, startPostgres } from "./postgres-server.ts";

/*
 * vitest globalSetup: one PostgreSQL for the whole run (an initdb and a start, not one per test file), its URL given
 * to the test files as `inject("postgresUrl")`; each file makes its own database there (createPostgresDatabase).
 */

declare module "vitest" {
  export interface ProvidedContext {
    /** The shared PostgreSQL's administrative URL; undefined when MOSS_TEST_POSTGRES is not 1. */
    postgresUrl: string | undefined;
  }
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  project.provide("postgresUrl", undefined);
  if (!POSTGRES_TESTS) return undefined;
  // Several files use it at once (vitest's workers), each with connection pools of its own: room for them all as
  // each had its own cluster's 100 before.
  const server = await startPostgres({ maxConnections: 300 });
  project.provide("postgresUrl", server.url);
  return () => server.stop();
}
