import { parentPort, workerData } from "node:worker_threads";
import { PGlite } from "@electric-sql/pglite";
import {
  CREATE_ONLY_ARGUMENT,
  PGLITE_SETTINGS,
  type PGliteReply,
  type PGliteRequest,
} from "./pglite-thread.ts";

/*
 * The worker thread that owns the embedded database (see `openPGliteThread`): PGlite runs Postgres compiled to WASM,
 * and each statement runs synchronously where PGlite lives. Here, that is off the thread serving HTTP.
 */

// Started as a process (createDatabase) with the create-only argument and the data directory; else a worker thread.
const createOnly = parentPort === null && process.argv[2] === CREATE_ONLY_ARGUMENT;
const dataDirectory = createOnly ? process.argv[3] : workerData?.dataDirectory;
if (parentPort === null && !createOnly) {
  process.stderr.write(`usage: pglite-thread-worker ${CREATE_ONLY_ARGUMENT} <data directory>\n`);
  process.exit(2);
}
// Only the thread sends: the process that makes a database answers with its exit code (and stderr).
const send = (reply: PGliteReply) => parentPort!.postMessage(reply);
type Executor = { query: (sql: string, parameters?: unknown[]) => Promise<{ rows: unknown[] }> };

let pglite: PGlite;
try {
  pglite = await PGlite.create(String(dataDirectory), {
    startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS.flatMap((setting) => ["-c", setting])],
  });
  if (createOnly) {
    // The database was only to be made (initdb): this process ends, and with it the WebAssembly memory initdb grew.
    await pglite.close();
    process.exit(0);
  }
  send({ kind: "ready" });
} catch (error) {
  const message = (error as Error)?.message ?? String(error);
  // A process's messages are sent asynchronously: its failure goes to stderr, which its parent reads, and its code.
  if (createOnly) {
    process.stderr.write(`${message}\n`);
    process.exit(1);
  }
  send({ kind: "open-failed", message });
  process.exit(0);
}

/** Open transactions by number: their executor, and how to end them (commit, or roll back). */
const transactions = new Map<number, { executor: Executor; end: (commit: boolean) => void }>();
let nextTransaction = 1;
const listeners = new Map<number, () => Promise<void>>();

function failure(error: unknown): { message: string; fields: Record<string, unknown> } {
  const fields: Record<string, unknown> = {};
  if (error !== null && typeof error === "object") {
    for (const [key, value] of Object.entries(error)) {
      if (typeof value === "string" || typeof value === "number") fields[key] = value;
    }
  }
  return { message: (error as Error)?.message ?? String(error), fields };
}

class RolledBack extends Error {}

async function handle(request: PGliteRequest): Promise<unknown> {
  switch (request.kind) {
    case "query": {
      const executor =
        request.transaction === undefined ? pglite : transactions.get(request.transaction)?.executor;
      if (executor === undefined) throw new Error(`transaction ${request.transaction} is not open`);
      return (await executor.query(request.sql, request.parameters)).rows;
    }
    case "begin": {
      const number = nextTransaction++;
      return new Promise<number>((resolve, reject) => {
        let begun = false;
        pglite
          .transaction(
            (executor) =>
              new Promise<void>((ended, rolledBack) => {
                begun = true;
                transactions.set(number, {
                  executor,
                  end: (commit) => (commit ? ended() : rolledBack(new RolledBack())),
                });
                resolve(number);
              }),
          )
          .then(
            () => send({ kind: "ended", transaction: number }),
            (error: unknown) => {
              // A transaction that could not begin fails its "begin"; one that began reports how it ended.
              if (!begun) reject(error);
              else
                send({
                  kind: "ended",
                  transaction: number,
                  ...(error instanceof RolledBack ? {} : { error: failure(error) }),
                });
            },
          )
          .finally(() => transactions.delete(number));
      });
    }
    case "end": {
      transactions.get(request.transaction)?.end(request.commit);
      return undefined;
    }
    case "listen": {
      listeners.set(
        request.listener,
        await pglite.listen(request.channel, (payload) =>
          send({ kind: "notification", listener: request.listener, payload }),
        ),
      );
      return undefined;
    }
    case "unlisten": {
      const stop = listeners.get(request.listener);
      listeners.delete(request.listener);
      if (stop !== undefined && !pglite.closed) await stop();
      return undefined;
    }
    case "close": {
      if (!pglite.closed) await pglite.close();
      return undefined;
    }
  }
}

parentPort!.on("message", (request: PGliteRequest) => {
  handle(request).then(
    (value) => send({ kind: "reply", id: request.id, value }),
    (error: unknown) => send({ kind: "reply", id: request.id, error: failure(error) }),
  );
});
