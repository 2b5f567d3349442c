// The thread's events (issue 18): a burst of events is stored in one statement under consecutive ids, in order,
// with one NOTIFY, on PGlite and on a real PostgreSQL (the same suite twice). Concurrent writers of one thread
// never share an id, and an unknown thread stores nothing.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, type DatabaseLocation, openDatabase } from "../../engine/server/store/database.ts";
import { CHANNELS, ServerStore } from "../../engine/server/store/index.ts";
import { freshPGliteDirectory } from "../helpers/fresh-pglite.ts";
import { createPostgresDatabase, type PostgresDatabase } from "../helpers/postgres-database.ts";
import { POSTGRES_TESTS } from "../helpers/postgres-server.ts";

function suite(name: string, locate: () => Promise<DatabaseLocation>, end: () => Promise<void>) {
  describe(`${name}: event bursts`, () => {
    let database: Database;
    let store: ServerStore;
    const notified: string[] = [];
    let stopListening: (() => Promise<void>) | undefined;
    beforeAll(async () => {
      database = await openDatabase(await locate());
      store = new ServerStore(database);
      stopListening = await database.listen(CHANNELS.events, (payload) => notified.push(payload));
    }, 60_000);
    afterAll(async () => {
      await stopListening?.();
      await database?.close();
      await end();
    });

    it("stores a burst under consecutive ids in order, with its data, and notifies once naming the last id", async () => {
      await store.createThread("acme", "burst");
      const first = await store.appendEvent("acme", "burst", null, { type: "note", text: "before" });
      const last = await store.appendEvents("acme", "burst", "run-1", [
        { type: "text-delta", text: "Hel" },
        { type: "text-delta", text: "lo" },
        { type: "message", content: "Hello" },
      ]);
      expect(last).toBe(first + 3);
      const stored = await store.eventsAfter("acme", "burst", 0);
      expect(stored.map((event) => [event.id, event.runId, event.type])).toEqual([
        [first, null, "note"],
        [first + 1, "run-1", "text-delta"],
        [first + 2, "run-1", "text-delta"],
        [first + 3, "run-1", "message"],
      ]);
      expect(stored[2]!.data).toMatchObject({ type: "text-delta", text: "lo", runId: "run-1" });
      expect(await store.lastEventId("acme", "burst")).toBe(last);
      // NOTIFY arrives after the commit; two statements, two notifications, the second naming the burst's last id.
      for (let wait = 0; wait < 200 && notified.length < 2; wait++)
        await new Promise((resolve) => setTimeout(resolve, 10));
      expect(notified.map((payload) => JSON.parse(payload))).toEqual([
        ["acme", "burst", first],
        ["acme", "burst", last],
      ]);
    });

    it("concurrent bursts of one thread never share an id; a burst stays contiguous", async () => {
      await store.createThread("acme", "busy");
      const bursts = Array.from({ length: 6 }, (_, writer) =>
        Array.from({ length: 4 }, (_, index) => ({ type: "step", writer, index })),
      );
      await Promise.all(bursts.map((events) => store.appendEvents("acme", "busy", null, events)));
      const stored = await store.eventsAfter("acme", "busy", 0);
      expect(stored.map((event) => event.id)).toEqual(Array.from({ length: 24 }, (_, index) => index + 1));
      for (let start = 0; start < 24; start += 4) {
        const group = stored
          .slice(start, start + 4)
          .map((event) => event.data as { writer: number; index: number });
        expect(new Set(group.map((data) => data.writer)).size).toBe(1);
        expect(group.map((data) => data.index)).toEqual([0, 1, 2, 3]);
      }
    });

    it("refuses a burst for an unknown thread and stores nothing", async () => {
      await expect(store.appendEvents("acme", "nope", null, [{ type: "note" }])).rejects.toMatchObject({
        message: expect.stringContaining("nope"),
      });
      expect(await store.eventsAfter("acme", "nope", 0)).toEqual([]);
    });
  });
}

let pgliteDirectory: string | undefined;
suite(
  "PGlite",
  async () => {
    pgliteDirectory = await mkdtemp(join(tmpdir(), "moss-bursts-"));
    return { dataDirectory: await freshPGliteDirectory(pgliteDirectory) };
  },
  async () => {
    if (pgliteDirectory !== undefined) await rm(pgliteDirectory, { recursive: true, force: true });
  },
);

let postgres: PostgresDatabase | undefined;
describe.runIf(POSTGRES_TESTS)("with a real PostgreSQL", () => {
  suite(
    "PostgreSQL",
    async () => {
      postgres = await createPostgresDatabase();
      return { url: postgres.url };
    },
    async () => {
      await postgres?.drop();
    },
  );
});
