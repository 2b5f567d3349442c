import { randomBytes } from "node:crypto";
import { inject } from "vitest";

/** A fresh, empty database of its own for a test file; `drop` removes it (and ends what is still connected). */
export interface PostgresDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * A fresh database on the test run's one PostgreSQL (started by test/helpers/postgres-global-setup.ts): each file's
 * own database, as empty as a new cluster's, without an initdb per file. LISTEN/NOTIFY, tables and locks are per
 * database, so files running at once do not meet. A test that stops or cuts its server uses `startPostgres()`.
 */
export async function createPostgresDatabase(): Promise<PostgresDatabase> {
  const shared = inject("postgresUrl");
  if (shared === undefined)
    throw new Error(
      "no shared PostgreSQL: MOSS_TEST_POSTGRES=1 with vitest.config.ts (its globalSetup starts one per run)",
    );
  const pg = (await import("pg")).default;
  const name = `moss_${randomBytes(8).toString("hex")}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: shared });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(shared);
  url.pathname = `/${name}`;
  return { url: url.href, drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
