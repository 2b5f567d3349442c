// One contract for every ContextStore and ConversationStore (issue 18): the file stores, PGlite and a real
// PostgreSQL run the same cases. A store is reopened (a new object over the same files or database) to show that
// what was saved outlives the object that saved it.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ContextStore } from "../../engine/context/context-store.ts";
import { createContext, encodeProperties, FileContextStore } from "../../engine/context/index.ts";
import { Conversation } from "../../engine/model/conversation.ts";
import { type ConversationStore, FileConversationStore } from "../../engine/model/conversation-store.ts";
import { type Database, openDatabase } from "../../engine/server/store/database.ts";
import {
  DatabaseContextStore,
  DatabaseConversationStore,
} from "../../engine/server/store/database-stores.ts";
import { freshPGliteDirectory } from "../helpers/fresh-pglite.ts";
import { createPostgresDatabase, type PostgresDatabase } from "../helpers/postgres-database.ts";
import { POSTGRES_TESTS } from "../helpers/postgres-server.ts";

/** A place stores live in: `open` makes new store objects over it; `close` ends it. */
interface StoreBackend {
  open(): Promise<{ contexts: ContextStore; conversations: ConversationStore; close(): Promise<void> }>;
  close(): Promise<void>;
}

function contract(name: string, backend: () => StoreBackend) {
  describe(`${name} stores`, () => {
    let place: StoreBackend;
    beforeAll(() => {
      place = backend();
    });
    afterAll(async () => {
      await place.close();
    });

    it("loads undefined for a session never saved, and deletes nothing", async () => {
      const stores = await place.open();
      try {
        expect(await stores.contexts.load("never-saved")).toBeUndefined();
        expect(await stores.contexts.delete("never-saved")).toBe(false);
        expect(await stores.conversations.load("never-saved")).toBeUndefined();
      } finally {
        await stores.close();
      }
    });

    it("returns a saved context exactly (typed values, key order), replaces it on save, and keeps it for a new store", async () => {
      const first = await place.open();
      const context = {
        ...createContext(
          "context.ts",
          encodeProperties({ when: new Date(0), seen: new Set([1, 2]), big: 12n, zed: 1, alpha: "a" })
            .properties,
        ),
        code: "export const x = 1;",
      };
      try {
        await first.contexts.save("s-1", context);
        expect(JSON.stringify(await first.contexts.load("s-1"))).toBe(JSON.stringify(context));
        const changed = { ...context, executed: true, properties: encodeProperties({ zed: 2 }).properties };
        await first.contexts.save("s-1", changed);
        expect(await first.contexts.load("s-1")).toEqual(changed);
      } finally {
        await first.close();
      }
      const second = await place.open();
      try {
        expect((await second.contexts.load("s-1"))?.executed).toBe(true);
      } finally {
        await second.close();
      }
    });

    it("refuses an invalid context and keeps the saved one", async () => {
      const stores = await place.open();
      try {
        const good = createContext("m.ts");
        await stores.contexts.save("invalid-1", good);
        const bad = { ...good, properties: { x: 1 } } as unknown as typeof good;
        await expect(stores.contexts.save("invalid-1", bad)).rejects.toMatchObject({
          code: "context-invalid",
        });
        expect(await stores.contexts.load("invalid-1")).toEqual(good);
      } finally {
        await stores.close();
      }
    });

    it("lists saved sessions sorted and forgets a deleted one", async () => {
      const stores = await place.open();
      try {
        for (const id of ["list-b", "list-a", "list-c"])
          await stores.contexts.save(id, createContext("m.ts"));
        const listed = (await stores.contexts.list()).filter((id) => id.startsWith("list-"));
        expect(listed).toEqual(["list-a", "list-b", "list-c"]);
        expect(await stores.contexts.delete("list-b")).toBe(true);
        expect(await stores.contexts.load("list-b")).toBeUndefined();
        expect((await stores.contexts.list()).filter((id) => id.startsWith("list-"))).toEqual([
          "list-a",
          "list-c",
        ]);
      } finally {
        await stores.close();
      }
    });

    it("keeps a conversation tree with its branches and head for a new store", async () => {
      const conversation = new Conversation();
      const task = conversation.append("user", "do it");
      const answer = conversation.append("assistant", "first try", { step: 1 });
      conversation.checkout(task.id);
      const retry = conversation.append("assistant", "second try");
      const first = await place.open();
      try {
        await first.conversations.save("c-1", conversation);
      } finally {
        await first.close();
      }
      const second = await place.open();
      try {
        const loaded = await second.conversations.load("c-1");
        expect(loaded?.toJSON()).toEqual(conversation.toJSON());
        expect(loaded?.children(task.id).map((message) => message.id)).toEqual([answer.id, retry.id]);
        expect(loaded?.thread().map((message) => message.content)).toEqual(["do it", "second try"]);
      } finally {
        await second.close();
      }
    });
  });
}

contract("file", () => {
  const directory = mkdtemp(join(tmpdir(), "moss-store-contract-"));
  return {
    async open() {
      const sessions = join(await directory, "sessions");
      const contexts = new FileContextStore(sessions);
      return {
        contexts,
        conversations: new FileConversationStore(sessions),
        close: () => contexts.close(),
      };
    },
    async close() {
      await rm(await directory, { recursive: true, force: true });
    },
  };
});

/** A database backend: each `open` is a new connection (a new PGlite instance over the same directory). */
function databaseBackend(
  locate: () => Promise<{ url: string } | { dataDirectory: string }>,
  end: () => Promise<void>,
) {
  // Located when the suite starts (its beforeAll), never while tests are collected: a skipped PostgreSQL suite
  // must not start a server.
  return (): StoreBackend => {
    const location = locate();
    return {
      async open() {
        const database: Database = await openDatabase(await location);
        return {
          contexts: new DatabaseContextStore(database),
          conversations: new DatabaseConversationStore(database),
          close: () => database.close(),
        };
      },
      close: end,
    };
  };
}

let pgliteDirectory: string | undefined;
contract(
  "PGlite",
  databaseBackend(
    async () => {
      pgliteDirectory = await mkdtemp(join(tmpdir(), "moss-store-pglite-"));
      return { dataDirectory: await freshPGliteDirectory(pgliteDirectory) };
    },
    async () => {
      if (pgliteDirectory !== undefined) await rm(pgliteDirectory, { recursive: true, force: true });
    },
  ),
);

let postgres: PostgresDatabase | undefined;
describe.runIf(POSTGRES_TESTS)("with a real PostgreSQL", () => {
  contract(
    "PostgreSQL",
    databaseBackend(
      async () => {
        postgres = await createPostgresDatabase();
        return { url: postgres.url };
      },
      async () => {
        await postgres?.drop();
      },
    ),
  );
});
