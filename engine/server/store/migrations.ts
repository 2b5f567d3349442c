import type { Database, SqlExecutor } from "./database.ts";

/** One step of the schema: applied once, in order, recorded in `moss_migrations`. */
interface Migration {
  version: number;
  name: string;
  sql: string;
}

// Documents and events are `json`, not `jsonb`: their text (key order) comes back exactly as written.
// Append new migrations; never edit an applied one (databases in use already ran it).
const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "stores, threads, runs, events, pending requests, idempotency keys",
    sql: `
CREATE TABLE moss_settings (
  key text PRIMARY KEY,
  value text NOT NULL
);
CREATE TABLE moss_contexts (
  session_id text PRIMARY KEY,
  document json NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE moss_conversations (
  session_id text PRIMARY KEY,
  document json NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE moss_threads (
  tenant text NOT NULL,
  id text NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}',
  last_event_id integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (tenant, id)
);
CREATE INDEX moss_threads_newest ON moss_threads (tenant, created_at DESC);
CREATE TABLE moss_runs (
  id text PRIMARY KEY,
  tenant text NOT NULL,
  thread_id text NOT NULL,
  status text NOT NULL,
  message text NOT NULL,
  images jsonb,
  answers jsonb,
  lease_owner text,
  lease_expires_at timestamptz,
  heartbeat_at timestamptz,
  attempts integer NOT NULL DEFAULT 0,
  cancel_requested boolean NOT NULL DEFAULT false,
  stop_reason text,
  answer text,
  error text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  FOREIGN KEY (tenant, thread_id) REFERENCES moss_threads (tenant, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX moss_runs_one_active_per_thread ON moss_runs (tenant, thread_id)
  WHERE status IN ('queued', 'running', 'pending');
CREATE INDEX moss_runs_claimable ON moss_runs (created_at) WHERE status IN ('queued', 'running');
CREATE TABLE moss_events (
  tenant text NOT NULL,
  thread_id text NOT NULL,
  id integer NOT NULL,
  run_id text,
  type text NOT NULL,
  data json NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (tenant, thread_id, id),
  FOREIGN KEY (tenant, thread_id) REFERENCES moss_threads (tenant, id) ON DELETE CASCADE
);
CREATE TABLE moss_pending_requests (
  run_id text NOT NULL REFERENCES moss_runs (id) ON DELETE CASCADE,
  id text NOT NULL,
  position integer NOT NULL,
  kind text NOT NULL,
  request jsonb NOT NULL,
  answer jsonb,
  answered_at timestamptz,
  PRIMARY KEY (run_id, id)
);
CREATE TABLE moss_idempotency_keys (
  tenant text NOT NULL,
  key text NOT NULL,
  request_hash text NOT NULL,
  status integer NOT NULL,
  body jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, key)
);
`,
  },
  {
    version: 2,
    name: "run checkpoints: a taken-over run resumes by replay",
    sql: `
ALTER TABLE moss_runs ADD COLUMN checkpoint text;
`,
  },
  {
    version: 3,
    name: "run takeovers: a run taken over too many times fails instead of running again",
    sql: `
ALTER TABLE moss_runs ADD COLUMN takeovers integer NOT NULL DEFAULT 0;
`,
  },
  {
    version: 4,
    name: "fair claiming: when each tenant's run was last claimed",
    sql: `
CREATE TABLE moss_tenant_turns (
  tenant text PRIMARY KEY,
  claimed_at timestamptz NOT NULL
);
`,
  },
];

/** The schema version this code expects. */
export const SCHEMA_VERSION = MIGRATIONS.at(-1)!.version;

// Any fixed number: every moss process on one database takes the same lock while it migrates.
const MIGRATION_LOCK = 7_270_118;

/** Applies the migrations the database lacks, in one transaction per migration, one process at a time. */
export async function migrate(database: Database): Promise<number[]> {
  // Two processes starting on a new database would race to create the table: it is made under the lock too.
  await database.transaction(async (executor) => {
    await executor.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    await executor.query(
      `CREATE TABLE IF NOT EXISTS moss_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`,
    );
  });
  const applied: number[] = [];
  for (const migration of MIGRATIONS) {
    const ran = await database.transaction(async (executor: SqlExecutor) => {
      await executor.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
      const done = await executor.query("SELECT 1 FROM moss_migrations WHERE version = $1", [
        migration.version,
      ]);
      if (done.length > 0) return false;
      for (const statement of splitStatements(migration.sql)) await executor.query(statement);
      await executor.query("INSERT INTO moss_migrations (version, name) VALUES ($1, $2)", [
        migration.version,
        migration.name,
      ]);
      return true;
    });
    if (ran) applied.push(migration.version);
  }
  return applied;
}

// Migrations hold no string literals with semicolons, so a split on `;` at line ends is exact.
function splitStatements(sql: string): string[] {
  return sql
    .split(/;\s*\n/)
    .map((statement) => statement.trim().replace(/;$/, ""))
    .filter((statement) => statement !== "");
}
