// The embedded database in a worker thread of its own (issue 18): the Database contract across the thread — rows,
// a transaction that commits or rolls back, a database error with its SQLSTATE code, LISTEN/NOTIFY, close.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Database } from "../../engine/server/store/database.ts";
import { openPGliteThread } from "../../engine/server/store/pglite-thread.ts";

let directory: string;
let database: Database;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-pglite-thread-"));
  database = await openPGliteThread(directory);
  await database.query("CREATE TABLE notes (id integer PRIMARY KEY, body json, at timestamptz)");
}, 60_000);
afterAll(async () => {
  await database?.close();
  await rm(directory, { recursive: true, force: true });
});

it("returns parsed rows: json as objects, timestamps as Dates", async () => {
  await database.query("INSERT INTO notes VALUES ($1, $2, $3)", [
    1,
    JSON.stringify({ a: [1, 2] }),
    new Date(0),
  ]);
  const [row] = await database.query<{ id: number; body: unknown; at: Date }>(
    "SELECT * FROM notes WHERE id = 1",
  );
  expect(row!.body).toEqual({ a: [1, 2] });
  expect(row!.at).toBeInstanceOf(Date);
  expect(row!.at.getTime()).toBe(0);
});

it("commits a transaction whose body resolves, and rolls back one whose body throws (rethrowing its error)", async () => {
  const value = await database.transaction(async (executor) => {
    await executor.query("INSERT INTO notes (id) VALUES (2)");
    return "kept";
  });
  expect(value).toBe("kept");
  const failure = new Error("the body changed its mind");
  await expect(
    database.transaction(async (executor) => {
      await executor.query("INSERT INTO notes (id) VALUES (3)");
      throw failure;
    }),
  ).rejects.toBe(failure);
  const ids = await database.query<{ id: number }>("SELECT id FROM notes ORDER BY id");
  expect(ids.map((row) => row.id)).toEqual([1, 2]);
});

it("a database error keeps its message and SQLSTATE code across the thread", async () => {
  await expect(database.query("INSERT INTO notes (id) VALUES (1)")).rejects.toMatchObject({
    code: "23505",
    message: expect.stringContaining("duplicate key"),
  });
  await expect(database.query("SELECT * FROM nowhere")).rejects.toMatchObject({ code: "42P01" });
});

it("delivers NOTIFY to a listener until it stops listening", async () => {
  const heard: string[] = [];
  const stop = await database.listen("moss_test", (payload) => heard.push(payload));
  await database.notify("moss_test", "one");
  for (let wait = 0; wait < 200 && heard.length === 0; wait++) await new Promise((r) => setTimeout(r, 10));
  await stop();
  await database.notify("moss_test", "two");
  await database.query("SELECT 1");
  expect(heard).toEqual(["one"]);
});

it("refuses queries once closed, with a clear error", async () => {
  const other = await openPGliteThread(join(directory, "second"));
  await other.close();
  await expect(other.query("SELECT 1")).rejects.toThrow("the embedded database is closed");
}, 60_000);

it("runs with the small-footprint settings, and a database it made opens again with what was stored", async () => {
  const [setting] = await database.query<{ shared_buffers: string }>("SHOW shared_buffers");
  expect(setting!.shared_buffers).toBe("16MB");
  // The database was made by a process that ended (initdb's memory went with it); this one opened it.
  await database.query("INSERT INTO notes (id) VALUES (100)");
  const again = await openPGliteThread(join(directory, "second"));
  try {
    await again.query("CREATE TABLE kept (id integer)");
    await again.query("INSERT INTO kept VALUES (7)");
  } finally {
    await again.close();
  }
  const reopened = await openPGliteThread(join(directory, "second"));
  try {
    expect(await reopened.query("SELECT id FROM kept")).toEqual([{ id: 7 }]);
  } finally {
    await reopened.close();
  }
}, 120_000);

it("names the directory and the cause when a new database cannot be made", async () => {
  const blocker = join(directory, "a-file");
  await writeFile(blocker, "not a directory");
  await expect(openPGliteThread(join(blocker, "db"))).rejects.toThrow(/embedded database in .*a-file\/db/);
});
