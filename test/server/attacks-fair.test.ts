// Issue 23 §3, one tenant cannot hurt another: attacks on the server's fairness and bounds. Counting a hostile
// message does not freeze the server, one tenant's queue does not keep another's run waiting, and a slow reader,
// a large metadata or a long list cannot grow the server's memory without bound. On PGlite, and on PostgreSQL
// where the class is the database's (MOSS_TEST_POSTGRES=1).
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countTokens } from "../../engine/agent/context-window.ts";
import { loadMossConfig } from "../../engine/cli/moss-config.ts";
import { EVENT_PAGE_BYTES, LIST_PAGE_BYTES, MAX_METADATA_BYTES } from "../../engine/server/answer-bounds.ts";
import { streamHeldBytes } from "../../engine/server/http/follow-thread-events.ts";
import { type Database, openDatabase } from "../../engine/server/store/database.ts";
import { ServerStore } from "../../engine/server/store/server-store.ts";
import { freshPGliteDirectory } from "../helpers/fresh-pglite.ts";
import { createPostgresDatabase, type PostgresDatabase } from "../helpers/postgres-database.ts";
import { POSTGRES_TESTS } from "../helpers/postgres-server.ts";
import { call, readEvents, runSettles, TOKENS, useVaultServer } from "./server-harness.ts";

describe("token counting is linear and off the thread that serves HTTP", () => {
  it("counts a megabyte of one letter (byte-pair encoding was quadratic in a word: hours)", () => {
    const count = countTokens("a".repeat(1_000_000));
    expect(count).toBeGreaterThan(1_000_000 / 16 - 1);
    expect(count).toBeLessThan(1_000_000);
    // A special token's text is text a tenant may send: it counts, it does not throw.
    expect(countTokens("before <|endoftext|> after")).toBeGreaterThan(2);
  });

  const fixture = useVaultServer("moss-fair-count-");

  it("/health answers while a 1 MB one-letter message is counted, and the run goes on", async () => {
    fixture.replies.push({ content: "Read it." });
    const thread = (await call(fixture.server, "POST", "/v1/threads", { body: {} })).body.thread;
    const posted = await call(fixture.server, "POST", `/v1/threads/${thread.id}/runs`, {
      body: { message: "a".repeat(1_000_000) },
    });
    expect(posted.status).toBe(202);
    // Before the fix the count ran on this thread and held it for hours: /health never answered.
    const health = await call(fixture.server, "GET", "/health", { tenant: null });
    expect(health.status).toBe(200);
    const events = await readEvents(fixture.server, thread.id, runSettles);
    const ended = events.at(-1)!;
    // The message was counted: it fits the default context (answered), or it is refused as too long for it (the
    // tenant reads the stable context-overflow text; the count's details go to the operator's log).
    expect(["completed", "failed"]).toContain(ended.data.status);
    const run = (await call(fixture.server, "GET", `/v1/threads/${thread.id}/runs/${posted.body.run.id}`))
      .body.run;
    if (run.status === "failed") expect(run.error).toMatch(/does not fit the model's context/);
    else expect(fixture.model.requests.at(-1)!.body.messages.at(-1).content).toContain("a".repeat(1000));
  }, 120_000);
});

/** A database for store-level attacks: PGlite in a temporary directory, or a real PostgreSQL. */
function useDatabase(kind: "pglite" | "postgres"): { database: () => Database } {
  let database: Database;
  let directory: string | undefined;
  let postgres: PostgresDatabase | undefined;
  beforeAll(async () => {
    if (kind === "postgres") {
      postgres = await createPostgresDatabase();
      database = await openDatabase({ url: postgres.url });
    } else {
      directory = await mkdtemp(join(tmpdir(), "moss-fair-db-"));
      database = await openDatabase({ dataDirectory: await freshPGliteDirectory(join(directory, "data")) });
    }
  }, 120_000);
  afterAll(async () => {
    await database?.close();
    await postgres?.drop();
    if (directory !== undefined) await rm(directory, { recursive: true, force: true });
  });
  return { database: () => database };
}

function fairClaiming(kind: "pglite" | "postgres") {
  describe(`fair claiming (${kind})`, () => {
    const place = useDatabase(kind);

    /** Queues one run on a new thread of `tenant`; resolves its id. */
    async function queue(store: ServerStore, tenant: string, name: string): Promise<string> {
      const { thread } = await store.createThread(tenant, name);
      return (await store.createRun(tenant, thread.id, `task ${name}`, { maxActiveRuns: 100 })).id;
    }

    it("claims tenant B's single run before tenant A's 12th (one slot, runs end one by one)", async () => {
      const store = new ServerStore(place.database());
      const runsOfA: string[] = [];
      for (let index = 0; index < 12; index++) runsOfA.push(await queue(store, "tenant-a", `a-${index}`));
      const runOfB = await queue(store, "tenant-b", "b-0");
      const order: string[] = [];
      for (;;) {
        const claimed = await store.claimRun("worker-1", 60_000);
        if (claimed === undefined) break;
        order.push(claimed.run.id);
        await store.finishRun(claimed, "worker-1", { status: "completed", answer: "done" });
      }
      expect(order).toHaveLength(13);
      expect(order.indexOf(runOfB)).toBeLessThan(order.indexOf(runsOfA[11]!));
      // Round-robin: B's run is the second claimed, right after A's oldest.
      expect(order.slice(0, 2)).toEqual([runsOfA[0], runOfB]);
      // Within a tenant, oldest first.
      expect(order.filter((id) => id !== runOfB)).toEqual(runsOfA);
    });

    it("shares the slots among tenants with queued work, and holds each tenant to its share", async () => {
      const store = new ServerStore(place.database());
      const runsOfC: string[] = [];
      for (let index = 0; index < 6; index++) runsOfC.push(await queue(store, "tenant-c", `c-${index}`));
      const runOfD = await queue(store, "tenant-d", "d-0");
      const fairness = { maxRunsPerTenant: 2 };
      const claims: string[] = [];
      for (;;) {
        const claimed = await store.claimRun("worker-2", 60_000, claims, fairness);
        if (claimed === undefined) break;
        claims.push(claimed.run.id);
      }
      // C holds its share (2 running), D its single run; C's other 4 wait for C's own runs to end.
      expect(claims).toHaveLength(3);
      expect(claims).toContain(runOfD);
      expect(claims.filter((id) => runsOfC.includes(id))).toEqual(runsOfC.slice(0, 2));
    });
  });
}

function databaseBounds(kind: "pglite" | "postgres") {
  describe(`pages bounded in bytes by the database (${kind})`, () => {
    const place = useDatabase(kind);

    it("reads a page of events up to its byte bound (always one), and says more follow", async () => {
      const store = new ServerStore(place.database());
      const { thread } = await store.createThread("tenant-e", "events");
      const size = 40 * 1024;
      await store.appendEvents(
        "tenant-e",
        thread.id,
        null,
        Array.from({ length: 30 }, (_, index) => ({
          type: "notice",
          message: `${index} ${"x".repeat(size)}`,
        })),
      );
      const page = await store.eventPage("tenant-e", thread.id, 0, 500, 100 * 1024);
      expect(page.events.map((event) => event.id)).toEqual([1, 2]);
      expect(page.more).toBe(true);
      const single = await store.eventPage("tenant-e", thread.id, 0, 500, 10);
      expect(single.events.map((event) => event.id)).toEqual([1]);
      const rest = await store.eventPage("tenant-e", thread.id, 28, 500, 100 * 1024);
      expect(rest.events.map((event) => event.id)).toEqual([29, 30]);
      expect(rest.more).toBe(false);
    });

    it("cuts a thread list page at its byte bound and names the next page", async () => {
      const store = new ServerStore(place.database());
      for (let index = 0; index < 5; index++) {
        await store.createThread("tenant-f", `listed-${index}`, { note: "y".repeat(10_000) });
      }
      const first = await store.listThreadPage("tenant-f", 50, undefined, 25_000);
      expect(first.threads.map((thread) => thread.id)).toEqual(["listed-4", "listed-3"]);
      expect(first.next).toBe("listed-3");
      const all = await store.listThreadPage("tenant-f", 50, undefined, 1_000_000);
      expect(all.threads).toHaveLength(5);
      expect(all.next).toBeUndefined();
      const byCount = await store.listThreadPage("tenant-f", 5, undefined, 1_000_000);
      expect(byCount.next).toBeUndefined();
      const cut = await store.listThreadPage("tenant-f", 4, undefined, 1_000_000);
      expect(cut.next).toBe("listed-1");
    });
  });
}

describe("the per-tenant share is a setting like the other worker settings", () => {
  it("reads worker.maxRunsPerTenant from moss.config.yaml and refuses one below 1 at its line", async () => {
    const directory = await mkdtemp(join(tmpdir(), "moss-fair-config-"));
    try {
      await writeFile(join(directory, "context.ts"), "export class Moss {}\n");
      const file = join(directory, "moss.config.yaml");
      await writeFile(file, "worker:\n  maxRunsPerTenant: 3\n");
      const config = await loadMossConfig({ cwd: directory, file, modulePath: "context.ts" });
      expect(config.get("worker.maxRunsPerTenant")).toBe(3);
      await writeFile(file, "worker:\n  maxRunsPerTenant: 0\n");
      await expect(loadMossConfig({ cwd: directory, file, modulePath: "context.ts" })).rejects.toThrow(
        /moss\.config\.yaml:2:\d+.*maxRunsPerTenant/,
      );
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

fairClaiming("pglite");
databaseBounds("pglite");
describe.runIf(POSTGRES_TESTS)("bounds on PostgreSQL", () => databaseBounds("postgres"));
describe.runIf(POSTGRES_TESTS)("on PostgreSQL", () => fairClaiming("postgres"));

describe("bounded memory per reader and per answer", () => {
  const fixture = useVaultServer("moss-fair-bounds-");

  it("refuses metadata over the documented size with 413 naming metadata, and stores nothing", async () => {
    const big = { note: "m".repeat(MAX_METADATA_BYTES) };
    const refused = await call(fixture.server, "POST", "/v1/threads", {
      body: { id: "too-big", metadata: big },
    });
    expect(refused.status).toBe(413);
    expect(refused.body.error.code).toBe("metadata-too-large");
    expect(refused.body.error.message).toContain('"metadata"');
    expect(refused.body.error.message).toContain(String(MAX_METADATA_BYTES));
    expect((await call(fixture.server, "GET", "/v1/threads/too-big")).status).toBe(404);
    const fits = { note: "m".repeat(MAX_METADATA_BYTES - 100) };
    expect((await call(fixture.server, "POST", "/v1/threads", { body: { metadata: fits } })).status).toBe(
      201,
    );
  });

  it("bounds a list answer in bytes and pages the rest with next: every thread once", async () => {
    const metadata = { note: "n".repeat(MAX_METADATA_BYTES - 200) };
    const made: string[] = [];
    // Enough threads at the largest metadata to pass one page's bytes by a third.
    const count = Math.ceil((LIST_PAGE_BYTES * 4) / 3 / MAX_METADATA_BYTES);
    for (let index = 0; index < count; index++) {
      const created = await call(fixture.server, "POST", "/v1/threads", {
        tenant: "bob",
        body: { id: `listed-${index}`, metadata },
      });
      expect(created.status).toBe(201);
      made.push(created.body.thread.id);
    }
    const seen: string[] = [];
    let before: string | undefined;
    let pages = 0;
    for (;;) {
      const path = `/v1/threads?limit=500${before === undefined ? "" : `&before=${before}`}`;
      const response = await fetch(`${fixture.server.url}${path}`, {
        headers: { authorization: `Bearer ${TOKENS.bob}` },
      });
      const text = await response.text();
      expect(response.status).toBe(200);
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(LIST_PAGE_BYTES + MAX_METADATA_BYTES);
      const page = JSON.parse(text) as { threads: Array<{ id: string }>; next?: string };
      seen.push(...page.threads.map((thread) => thread.id));
      pages += 1;
      if (page.next === undefined) break;
      expect(page.next).toBe(page.threads.at(-1)!.id);
      before = page.next;
    }
    expect(pages).toBeGreaterThan(1);
    expect(seen.sort()).toEqual(made.sort());
  }, 120_000);

  it("a reader that never reads a thread of large events holds one bounded page, not 500 events", async () => {
    const { store } = fixture.server;
    const thread = (await call(fixture.server, "POST", "/v1/threads", { body: {} })).body.thread;
    // More than the sockets take in (loopback buffers may hold tens of MiB per connection), in one old page (500).
    const size = 100 * 1024;
    const events = Array.from({ length: 480 }, (_, index) => ({
      type: "notice",
      message: `${index} ${"e".repeat(size)}`,
    }));
    for (let start = 0; start < events.length; start += 20) {
      await store.appendEvents("alice", thread.id, null, events.slice(start, start + 20));
    }
    // Readers that open the stream and never read from their sockets.
    const readers = Array.from({ length: 3 }, () => stalledReader(fixture.server.url!, thread.id));
    try {
      await Promise.all(readers.map((reader) => reader.opened));
      // Each stream fills its socket, then waits with what it read and could not write yet.
      for (;;) {
        const held = streamHeldBytes();
        if (held.streams === readers.length && held.bytes > 0 && (await allStalled(held))) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const held = streamHeldBytes();
      expect(held.largest).toBeLessThanOrEqual(EVENT_PAGE_BYTES + size + 1024);
      expect(held.bytes).toBeLessThanOrEqual(readers.length * (EVENT_PAGE_BYTES + size + 1024));
    } finally {
      for (const reader of readers) reader.close();
    }
  }, 120_000);
});

/** Whether every open stream is waiting on its socket: what they hold stays the same over a few reads. */
async function allStalled(first: { bytes: number }): Promise<boolean> {
  for (let check = 0; check < 5; check++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (streamHeldBytes().bytes !== first.bytes) return false;
  }
  return true;
}

/** An event-stream request on a raw socket that stops reading once the response began (a client that never reads). */
function stalledReader(url: string, threadId: string): { opened: Promise<void>; close: () => void } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  const opened = new Promise<void>((resolve, reject) => {
    socket.once("data", () => {
      socket.pause();
      resolve();
    });
    socket.once("error", reject);
  });
  socket.write(
    `GET /v1/threads/${threadId}/events HTTP/1.1\r\nHost: ${hostname}:${port}\r\n` +
      `Authorization: Bearer ${TOKENS.alice}\r\nAccept: text/event-stream\r\n\r\n`,
  );
  return { opened, close: () => socket.destroy() };
}
