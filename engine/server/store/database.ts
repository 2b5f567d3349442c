import { mkdir } from "node:fs/promises";
import { resolve } from "node:path";
import { MossError } from "../../errors.ts";
import { migrate } from "./migrations.ts";
import { openPGliteThread } from "./pglite-thread.ts";

/** Runs SQL with `$1`-style parameters and returns the rows. */
export interface SqlExecutor {
  query<Row = Record<string, unknown>>(sql: string, parameters?: unknown[]): Promise<Row[]>;
}

/** One schema, two backends: PGlite (embedded, in-process) or PostgreSQL (shared by several processes). */
export interface Database extends SqlExecutor {
  readonly kind: "pglite" | "postgres";
  /** Runs `body` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(body: (executor: SqlExecutor) => Promise<T>): Promise<T>;
  /** Calls `onPayload` for every NOTIFY on `channel` (from any process on the same database); resolves a stop function. */
  listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  notify(channel: string, payload: string): Promise<void>;
  close(): Promise<void>;
}

/** Where the database lives: a PGlite data directory, or a PostgreSQL connection URL. */
export type DatabaseLocation = { dataDirectory: string } | { url: string };

/** Opens the database and brings its schema up to date (the migrations run once, under an advisory lock). */
export async function openDatabase(location: DatabaseLocation): Promise<Database> {
  const database =
    "url" in location ? await openPostgres(location.url) : await openPGlite(location.dataDirectory);
  try {
    await migrate(database);
  } catch (error) {
    await database.close();
    throw error;
  }
  return database;
}

async function openPGlite(dataDirectory: string): Promise<Database> {
  const directory = resolve(dataDirectory);
  await mkdir(directory, { recursive: true });
  return openPGliteThread(directory);
}

async function openPostgres(url: string): Promise<Database> {
  const { default: pg } = await import("pg");
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  // An idle client that loses its connection must not crash the process: the next query reconnects.
  pool.on("error", () => {});
  try {
    (await pool.connect()).release();
  } catch (error) {
    await pool.end();
    throw new MossError(
      "database-error",
      `Cannot connect to PostgreSQL at ${redactUrl(url)}: ${(error as Error).message}`,
      { url: redactUrl(url) },
      { cause: error },
    );
  }
  const listeners = new Map<string, Set<(payload: string) => void>>();
  let listening: Promise<import("pg").Client> | undefined;
  const listenClient = () => {
    listening ??= (async () => {
      const client = new pg.Client({ connectionString: url });
      client.on("error", () => {});
      client.on("notification", (message) => {
        for (const callback of listeners.get(message.channel) ?? []) callback(message.payload ?? "");
      });
      await client.connect();
      return client;
    })();
    return listening;
  };
  return {
    kind: "postgres",
    async query(sql, parameters) {
      return (await pool.query(sql, parameters)).rows;
    },
    async transaction(body) {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        const result = await body({
          query: async (sql, parameters) => (await client.query(sql, parameters)).rows,
        });
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => {});
        throw error;
      } finally {
        client.release();
      }
    },
    async listen(channel, onPayload) {
      const client = await listenClient();
      let callbacks = listeners.get(channel);
      if (callbacks === undefined) {
        callbacks = new Set();
        listeners.set(channel, callbacks);
        await client.query(`LISTEN ${quoteIdentifier(channel)}`);
      }
      callbacks.add(onPayload);
      return async () => {
        callbacks.delete(onPayload);
      };
    },
    async notify(channel, payload) {
      await pool.query("SELECT pg_notify($1, $2)", [channel, payload]);
    },
    async close() {
      const client = listening;
      listening = undefined;
      await (await client?.catch(() => undefined))?.end().catch(() => {});
      await pool.end();
    },
  };
}

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** The URL without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(an unparsable URL)";
  }
}
