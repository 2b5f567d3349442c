import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { MossError } from "../../errors.ts";
import { runnableEntry } from "../../runnable-entry.ts";
import type { Database, SqlExecutor } from "./database.ts";

/** What the thread that owns the embedded database is asked to do. */
export type PGliteCommand =
  | { kind: "query"; sql: string; parameters?: unknown[]; transaction?: number }
  | { kind: "begin" }
  | { kind: "end"; transaction: number; commit: boolean }
  | { kind: "listen"; channel: string; listener: number }
  | { kind: "unlisten"; listener: number }
  | { kind: "close" };

/** A command with the id its reply names. */
export type PGliteRequest = PGliteCommand & { id: number };

/** What a database failure carries across threads: its message and its plain fields (`code`, `detail`, …). */
export interface PGliteFailure {
  message: string;
  fields: Record<string, unknown>;
}

/** A message from the thread that owns the embedded database. */
export type PGliteReply =
  | { kind: "ready" }
  | { kind: "open-failed"; message: string }
  | { kind: "reply"; id: number; value?: unknown; error?: PGliteFailure }
  | { kind: "ended"; transaction: number; error?: PGliteFailure }
  | { kind: "notification"; listener: number; payload: string };

/**
 * Postgres settings of the embedded database, for a small footprint: one user and a few connections' worth of work,
 * where the defaults size shared buffers for a dedicated server. `shared_buffers` is the bulk of what PGlite holds
 * (128 MB by default, all of it touched at start in WebAssembly memory, which never shrinks): 16 MB keeps an idle
 * server's database at about 120 MiB instead of 250 MiB.
 */
export const PGLITE_SETTINGS: readonly string[] = ["shared_buffers=16MB"];

/**
 * Makes a new embedded database in `dataDirectory` in a process of its own that ends when it is made. initdb grows
 * PGlite's WebAssembly memory to about 450 MiB: a thread that made the database and then ended still left ~80 MiB of
 * it in the server's resident size (the allocator's arenas), for the server's life; an ended process leaves nothing.
 */
async function createDatabase(entry: string, dataDirectory: string): Promise<void> {
  const child = spawn(process.execPath, [entry, CREATE_ONLY_ARGUMENT, dataDirectory], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let failure: string | undefined;
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    if (stderr.length < 4000) stderr += chunk;
  });
  const code = await new Promise<number>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (exitCode, signal) => resolve(exitCode ?? (signal === null ? 1 : 128)));
  }).catch((error: Error) => {
    failure ??= error.message;
    return 1;
  });
  if (failure !== undefined || code !== 0)
    throw new MossError(
      "database-error",
      `Cannot create the embedded database in ${dataDirectory}: ${failure ?? (stderr.trim() || `its process exited (code ${code})`)}`,
      { directory: dataDirectory },
    );
}

/** The argument that starts pglite-thread-worker as a process that only makes a database. */
export const CREATE_ONLY_ARGUMENT = "--moss-create-database";

/**
 * Opens the embedded database (PGlite, Postgres compiled to WASM) in a worker thread of its own: each statement
 * runs synchronously where PGlite lives, so on the thread serving HTTP every query blocked every request. The
 * thread speaks a small message protocol (query, begin/end of a transaction, listen, close); rows arrive parsed.
 */
export async function openPGliteThread(dataDirectory: string): Promise<Database> {
  const source = import.meta.url.endsWith(".ts") ? "./pglite-thread-worker.ts" : "./pglite-thread-worker.js";
  const entry = runnableEntry(new URL(source, import.meta.url), { external: ["@electric-sql/pglite"] });
  // A new database is made (initdb) by a process of its own that then ends: WebAssembly memory only grows, and what
  // made the database held about 450 MiB more than what opens it (see createDatabase).
  if (!existsSync(join(dataDirectory, "PG_VERSION"))) await createDatabase(entry, dataDirectory);
  const worker = new Worker(entry, { workerData: { dataDirectory } });
  const waiting = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  const endings = new Map<number, (error: PGliteFailure | undefined) => void>();
  const listeners = new Map<number, (payload: string) => void>();
  let nextId = 1;
  let closed = false;
  let exitError: Error | undefined;
  // The thread keeps the process alive only while a request or a transaction waits for it (an idle open database
  // does not).
  function settleRef(): void {
    if (waiting.size === 0 && endings.size === 0) worker.unref();
    else worker.ref();
  }

  const opened = new Promise<void>((resolve, reject) => {
    worker.on("message", (message: PGliteReply) => {
      switch (message.kind) {
        case "ready":
          resolve();
          return;
        case "open-failed":
          reject(new Error(message.message));
          return;
        case "reply": {
          const pending = waiting.get(message.id);
          waiting.delete(message.id);
          if (message.error === undefined) pending?.resolve(message.value);
          else pending?.reject(errorOf(message.error));
          settleRef();
          return;
        }
        case "ended":
          endings.get(message.transaction)?.(message.error);
          endings.delete(message.transaction);
          settleRef();
          return;
        case "notification":
          listeners.get(message.listener)?.(message.payload);
          return;
      }
    });
    worker.on("error", (error) => {
      exitError = error;
      reject(error);
    });
    worker.on("exit", (code) => {
      exitError ??= new Error(`the embedded database's thread exited (code ${code})`);
      reject(exitError);
      for (const pending of waiting.values()) pending.reject(exitError);
      waiting.clear();
    });
  });
  try {
    await opened;
  } catch (error) {
    await worker.terminate();
    throw new MossError(
      "database-error",
      `Cannot open the embedded database in ${dataDirectory}: ${(error as Error).message}`,
      { directory: dataDirectory },
      { cause: error },
    );
  }

  settleRef();

  const request = <T>(body: PGliteCommand): Promise<T> => {
    if (closed && body.kind !== "close")
      return Promise.reject(new MossError("database-error", "the embedded database is closed", {}));
    if (exitError !== undefined) return Promise.reject(exitError);
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      waiting.set(id, { resolve: resolve as (value: unknown) => void, reject });
      settleRef();
      worker.postMessage({ ...body, id });
    });
  };
  const executor = (transaction?: number): SqlExecutor => ({
    query: <Row>(sql: string, parameters?: unknown[]) =>
      request<Row[]>({
        kind: "query",
        sql,
        ...(parameters === undefined ? {} : { parameters }),
        ...(transaction === undefined ? {} : { transaction }),
      }),
  });

  return {
    kind: "pglite",
    query: executor().query,
    async transaction(body) {
      const transaction = await request<number>({ kind: "begin" });
      const ended = new Promise<PGliteFailure | undefined>((resolve) => endings.set(transaction, resolve));
      settleRef();
      let result: Awaited<ReturnType<typeof body>>;
      try {
        result = await body(executor(transaction));
      } catch (error) {
        await request({ kind: "end", transaction, commit: false });
        await ended;
        throw error;
      }
      await request({ kind: "end", transaction, commit: true });
      const failed = await ended;
      if (failed !== undefined) throw errorOf(failed);
      return result;
    },
    async listen(channel, onPayload) {
      const listener = nextId++;
      listeners.set(listener, onPayload);
      await request({ kind: "listen", channel, listener });
      return async () => {
        listeners.delete(listener);
        if (!closed && exitError === undefined) await request({ kind: "unlisten", listener });
      };
    },
    async notify(channel, payload) {
      await request({ kind: "query", sql: "SELECT pg_notify($1, $2)", parameters: [channel, payload] });
    },
    async close() {
      if (closed) return;
      closed = true;
      if (exitError === undefined) await request({ kind: "close" }).catch(() => {});
      await worker.terminate();
    },
  };
}

/** A database failure from the thread, as an Error with its fields (`code`, `detail`, …). */
function errorOf(failure: PGliteFailure): Error {
  return Object.assign(new Error(failure.message), failure.fields);
}
