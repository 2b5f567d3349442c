import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  createContext,
  decodeProperties,
  encodeProperties,
  FileContextStore,
  readContextFile,
  writeContextFile,
} from "../../engine/context/index.ts";
import type { MossContext } from "../../engine/types.ts";
import { rejection } from "../helpers/rejection.ts";

const CONTEXT_MODULE = new URL("../../engine/context/index.ts", import.meta.url).href;

let directory: string;
const stores: FileContextStore[] = [];
const children: ChildProcess[] = [];

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-context-"));
});

afterEach(async () => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  for (const store of stores.splice(0)) await store.close();
  await rm(directory, { recursive: true, force: true });
});

function newStore(): FileContextStore {
  const store = new FileContextStore(directory);
  stores.push(store);
  return store;
}

function sample(values: Record<string, unknown> = { count: 1 }): MossContext {
  return createContext("examples/sphero/context.ts", encodeProperties(values).properties);
}

/** Starts `node` running an ES module script that can import the context module as `context`. */
function startNode(body: string): ChildProcess {
  const script = `const context = await import(${JSON.stringify(CONTEXT_MODULE)});\n${body}`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  return child;
}

function waitForOutput(child: ChildProcess, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes(text)) resolve();
    });
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on("exit", (code, signal) =>
      reject(new Error(`child exited (${code ?? signal}) before "${text}": ${stderr}`)),
    );
  });
}

function waitForExit(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null)
      resolve({ code: child.exitCode, signal: child.signalCode });
    else child.on("exit", (code, signal) => resolve({ code, signal }));
  });
}

/** A pid that belonged to a process which has exited. */
function deadPid(): number {
  const result = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], {
    encoding: "utf8",
  });
  return Number(result.stdout);
}

describe("FileContextStore save / load / list / delete", () => {
  it("loads undefined for a session never saved", async () => {
    await expect(newStore().load("absent")).resolves.toBeUndefined();
  });

  it("round-trips a context with typed properties through the file", async () => {
    const store = newStore();
    const context = {
      ...sample({ when: new Date(7), seen: new Set(["a"]), big: 2n, gone: undefined }),
      code: "export class Moss {}",
    };
    await store.save("session-1", context);
    const loaded = await newStore().load("session-1");
    expect(loaded).toEqual(context);
    expect(decodeProperties(loaded!.properties)).toEqual({
      when: new Date(7),
      seen: new Set(["a"]),
      big: 2n,
      gone: undefined,
    });
    const text = await readFile(join(directory, "session-1.json"), "utf8");
    expect(JSON.parse(text)).toEqual(context);
  });

  it("replaces the previous save and lists sessions sorted, without temp, lock or corrupt files", async () => {
    const store = newStore();
    await store.save("b", sample({ count: 1 }));
    await store.save("b", sample({ count: 2 }));
    await store.save("a", sample());
    await writeFile(join(directory, "c.corrupt-2024-01-01T00-00-00-000Z.json"), "{");
    await writeFile(join(directory, ".b.json.123.abcd.tmp"), "{");
    expect(decodeProperties((await store.load("b"))!.properties)).toEqual({ count: 2 });
    expect(await store.list()).toEqual(["a", "b"]);
    expect(await new FileContextStore(join(directory, "missing")).list()).toEqual([]);
  });

  it("a save with nothing new leaves the file as it is; a save with a change replaces it", async () => {
    const store = newStore();
    const path = store.contextPath("same");
    await store.save("same", sample({ count: 1 }));
    const first = await stat(path);
    await store.save("same", sample({ count: 1 }));
    expect((await stat(path)).ino).toBe(first.ino);
    await store.save("same", sample({ count: 2 }));
    expect((await stat(path)).ino).not.toBe(first.ino);
    expect(decodeProperties((await store.load("same"))!.properties)).toEqual({ count: 2 });
  });

  it("deletes a session and its lock, resolving whether it existed", async () => {
    const store = newStore();
    await store.save("gone", sample());
    await expect(store.delete("gone")).resolves.toBe(true);
    await expect(store.load("gone")).resolves.toBeUndefined();
    await expect(store.delete("gone")).resolves.toBe(false);
    expect(await readdir(directory)).toEqual([]);
  });

  it("refuses to save an invalid context", async () => {
    const error = await rejection(newStore().save("s", { version: 1, module: "m", properties: [] } as never));
    expect(error.code).toBe("context-invalid");
    await expect(newStore().load("s")).resolves.toBeUndefined();
  });

  it("rejects session ids that could name another path", async () => {
    const store = newStore();
    for (const sessionId of [
      "../escape",
      "a/b",
      "..",
      ".hidden",
      "",
      "a\\b",
      "x.json",
      "a\0b",
      "%2e%2e",
      "x".repeat(129),
    ]) {
      for (const operation of [
        () => store.save(sessionId, sample()),
        () => store.load(sessionId),
        () => store.delete(sessionId),
        () => store.acquire(sessionId),
      ]) {
        const error = await rejection(operation());
        expect(error.code).toBe("invalid-argument");
        expect(error.message).toContain("Invalid session id");
      }
    }
    expect(await readdir(directory)).toEqual([]);
    await store.save(`ok_${"x".repeat(120)}-1`, sample());
  });
});

describe("FileContextStore corrupt files", () => {
  it("reports bad JSON with the file, line and column, and does not touch the file", async () => {
    const path = join(directory, "broken.json");
    const text = '{\n  "version": 1,\n  "module": "m.ts"\n  "properties": {}\n}\n';
    await writeFile(path, text);
    const error = await rejection(newStore().load("broken"));
    expect(error.code).toBe("context-corrupt");
    expect(error.message.split("\n")[0]).toBe(
      `${path}:4:3 - corrupt MossContext file, invalid JSON at line 4, column 3: ` +
        "Expected ',' or '}' after property value in JSON at position 39",
    );
    expect(error.message).toContain('> 4 |   "properties": {}');
    expect(error.details).toMatchObject({ file: path, line: 4, column: 3 });
    expect(await readFile(path, "utf8")).toBe(text);
  });

  it("finds the position of JSON errors V8 reports without one", async () => {
    await writeFile(join(directory, "token.json"), '{"version": 1, "module": }');
    const error = await rejection(newStore().load("token"));
    expect(error.message).toMatch(
      /token\.json:1:26 - .*invalid JSON at line 1, column 26: Unexpected token '}'/,
    );
    await writeFile(join(directory, "empty.json"), "");
    expect((await rejection(newStore().load("empty"))).message).toContain("empty.json:1:1 - ");
  });

  it("reports a valid JSON file with an invalid shape as corrupt, naming what is wrong", async () => {
    const path = join(directory, "shape.json");
    await writeFile(path, JSON.stringify({ version: 9, module: "m.ts", properties: "x", executed: false }));
    const error = await rejection(newStore().load("shape"));
    expect(error.code).toBe("context-corrupt");
    expect(error.message).toBe(
      `${path} - corrupt MossContext file: unknown version 9 (expected 1 or 2; a newer moss-ts may have written it); properties must be an object`,
    );
  });

  it("moves a corrupt file aside before saving over it, so nothing is lost", async () => {
    const store = newStore();
    const path = join(directory, "s.json");
    await writeFile(path, "{ half a context");
    const report = await store.save("s", sample({ count: 5 }));
    expect(report.movedCorruptTo).toMatch(/[/\\]s\.corrupt-\d{4}-\d\d-\d\dT[\d-]+Z\.json$/);
    expect(await readFile(report.movedCorruptTo!, "utf8")).toBe("{ half a context");
    expect(decodeProperties((await store.load("s"))!.properties)).toEqual({ count: 5 });
    expect(await store.list()).toEqual(["s"]);

    await writeFile(path, "{ corrupt again");
    const second = await store.save("s", sample({ count: 6 }));
    expect(second.movedCorruptTo).toBeDefined();
    expect(second.movedCorruptTo).not.toBe(report.movedCorruptTo);
    expect(await readFile(report.movedCorruptTo!, "utf8")).toBe("{ half a context");
    expect(await readFile(second.movedCorruptTo!, "utf8")).toBe("{ corrupt again");

    const clean = await store.save("s", sample({ count: 7 }));
    expect(clean.movedCorruptTo).toBeUndefined();
  });
});

describe("FileContextStore atomic writes", () => {
  it("a writer killed in the middle of a write leaves the previous file intact", async () => {
    const store = newStore();
    const before = sample({ version: "before" });
    await store.save("atomic", before);
    await store.release("atomic");
    // The child writes half of the new text into its temp file, then is killed by SIGKILL before it can finish.
    const child = startNode(`
      const { open } = await import("node:fs/promises");
      const probe = await open(${JSON.stringify(join(directory, "probe"))}, "w");
      const FileHandle = probe.constructor;
      await probe.close();
      FileHandle.prototype.writeFile = async function (text) {
        await this.write(text.slice(0, text.length >> 1));
        await this.sync();
        process.kill(process.pid, "SIGKILL");
      };
      const store = new context.FileContextStore(${JSON.stringify(directory)});
      const { properties } = context.encodeProperties({ version: "after", padding: "x".repeat(100000) });
      await store.save("atomic", context.createContext("m.ts", properties));
    `);
    const exit = await waitForExit(child);
    expect(exit.signal).toBe("SIGKILL");
    const names = await readdir(directory);
    const temporary = names.filter((name) => name.endsWith(".tmp"));
    expect(temporary).toHaveLength(1);
    expect(temporary[0]).toMatch(/^\.atomic\.json\.\d+\.[0-9a-f]+\.tmp$/);
    const partial = await readFile(join(directory, temporary[0]!), "utf8");
    expect(partial.length).toBeGreaterThan(0);
    expect(() => JSON.parse(partial)).toThrow();
    await expect(store.load("atomic")).resolves.toEqual(before);
    expect(await store.list()).toEqual(["atomic"]);
    // The dead writer's lock is stale: a new writer takes over and saves.
    await store.save("atomic", sample({ version: "next" }));
    expect(decodeProperties((await store.load("atomic"))!.properties)).toEqual({ version: "next" });
  });

  it("writeContextFile and readContextFile work on a plain path, creating directories", async () => {
    const path = join(directory, "nested", "dir", "context.json");
    await expect(readContextFile(path)).resolves.toBeUndefined();
    const context = sample({ list: [1, 2] });
    await writeContextFile(path, context);
    await expect(readContextFile(path)).resolves.toEqual(context);
    expect((await readdir(join(directory, "nested", "dir"))).sort()).toEqual(["context.json"]);
    await writeFile(path, "not json");
    await expect(readContextFile(path)).rejects.toMatchObject({ code: "context-corrupt" });
    const report = await writeContextFile(path, context);
    expect(report.movedCorruptTo).toMatch(/context\.corrupt-.*\.json$/);
    await expect(readContextFile(path)).resolves.toEqual(context);
  });
});

describe("FileContextStore locks", () => {
  it("a second writer in another process fails with context-locked naming the owner, until the owner releases", async () => {
    const child = startNode(`
      const store = new context.FileContextStore(${JSON.stringify(directory)});
      // The handler is installed before "locked" is printed: a child descheduled right after printing (a busy
      // machine) must still release on SIGTERM, not die of it.
      process.on("SIGTERM", async () => { await store.close(); console.log("released"); process.exit(0); });
      await store.acquire("shared");
      setInterval(() => undefined, 1 << 30);
      console.log("locked");
    `);
    await waitForOutput(child, "locked");
    const store = newStore();
    const error = await rejection(store.save("shared", sample()));
    expect(error.code).toBe("context-locked");
    expect(error.message).toContain(`Session "shared" is locked by process ${child.pid} on this host`);
    expect(error.message).toContain(join(directory, "shared.lock"));
    expect(error.details.owner).toMatchObject({ pid: child.pid, hostname: hostname() });
    expect((await rejection(store.delete("shared"))).code).toBe("context-locked");
    await expect(store.load("shared")).resolves.toBeUndefined();

    const released = waitForOutput(child, "released");
    child.kill("SIGTERM");
    await released;
    await waitForExit(child);
    await store.save("shared", sample({ count: 2 }));
    // A save outside a run holds the lock only while it writes.
    expect(store.holds("shared")).toBe(false);
    expect(await readdir(directory)).not.toContain("shared.lock");
  });

  it("takes over the lock of a process killed while holding it", async () => {
    const child = startNode(`
      const store = new context.FileContextStore(${JSON.stringify(directory)});
      await store.acquire("crashy");
      console.log("locked");
      setInterval(() => undefined, 1 << 30);
    `);
    await waitForOutput(child, "locked");
    const store = newStore();
    expect((await rejection(store.save("crashy", sample()))).code).toBe("context-locked");
    child.kill("SIGKILL");
    await waitForExit(child);
    await store.acquire("crashy");
    const lock = JSON.parse(await readFile(join(directory, "crashy.lock"), "utf8"));
    expect(lock.pid).toBe(process.pid);
    await store.save("crashy", sample());
  });

  it("takes over a stale lock file left by a dead pid, and one naming this pid that no store holds", async () => {
    const store = newStore();
    const owner = {
      pid: deadPid(),
      hostname: hostname(),
      nonce: "old",
      acquiredAt: "2020-01-01T00:00:00.000Z",
    };
    await writeFile(join(directory, "stale.lock"), JSON.stringify(owner));
    await store.acquire("stale");
    await store.save("stale", sample());
    expect(JSON.parse(await readFile(join(directory, "stale.lock"), "utf8")).nonce).not.toBe("old");

    const reused = { ...owner, pid: process.pid, nonce: "previous-run" };
    await writeFile(join(directory, "reused.lock"), JSON.stringify(reused));
    await store.acquire("reused");
    expect(store.holds("reused")).toBe(true);
    await store.save("reused", sample());
  });

  it("treats a lock from another host as live", async () => {
    const owner = {
      pid: deadPid(),
      hostname: `${hostname()}-elsewhere`,
      nonce: "n",
      acquiredAt: "2020-01-01T00:00:00.000Z",
    };
    await writeFile(join(directory, "remote.lock"), JSON.stringify(owner));
    const error = await rejection(newStore().save("remote", sample()));
    expect(error.code).toBe("context-locked");
    expect(error.message).toContain(`on host ${hostname()}-elsewhere`);
  });

  it("a session is locked for a run (acquire … release), not for the lifetime of a store", async () => {
    const first = newStore();
    const second = newStore();
    // Two stores of one process (a server resumes a paused run in a new agent while the old one exists) take turns.
    await first.save("mine", sample({ count: 1 }));
    await second.save("mine", sample({ count: 2 }));
    // While one runs, the other cannot write, nor start a run of its own.
    await first.acquire("mine");
    await first.save("mine", sample({ count: 3 }));
    for (const attempt of [second.save("mine", sample({ count: 4 })), second.acquire("mine")]) {
      const error = await rejection(attempt);
      expect(error.code).toBe("context-locked");
      expect(error.message).toContain("another FileContextStore of this process holds it");
    }
    expect(decodeProperties((await first.load("mine"))!.properties)).toEqual({ count: 3 });
    await first.release("mine");
    await second.save("mine", sample({ count: 5 }));
    expect(decodeProperties((await first.load("mine"))!.properties)).toEqual({ count: 5 });
    expect(await readdir(directory)).toEqual(["mine.json"]);
  });

  it("concurrent saves of one store run in call order and all succeed", async () => {
    const store = newStore();
    await Promise.all([1, 2, 3, 4].map((count) => store.save("busy", sample({ count }))));
    expect(decodeProperties((await store.load("busy"))!.properties)).toEqual({ count: 4 });
    expect((await readdir(directory)).sort()).toEqual(["busy.json"]);
  });

  it("release and close remove the lock files; close is idempotent", async () => {
    const store = newStore();
    for (const id of ["a", "b"]) {
      await store.acquire(id);
      await store.save(id, sample());
    }
    expect((await readdir(directory)).sort()).toEqual(["a.json", "a.lock", "b.json", "b.lock"]);
    await store.release("a");
    expect(store.holds("a")).toBe(false);
    expect((await readdir(directory)).sort()).toEqual(["a.json", "b.json", "b.lock"]);
    await store.close();
    await store.close();
    expect((await readdir(directory)).sort()).toEqual(["a.json", "b.json"]);
  });

  it("a store whose lock was taken away refuses to write", async () => {
    const store = newStore();
    await store.acquire("s");
    await store.save("s", sample({ count: 1 }));
    const intruder = {
      pid: process.pid + 1,
      hostname: hostname(),
      nonce: "intruder",
      acquiredAt: new Date().toISOString(),
    };
    await writeFile(join(directory, "s.lock"), JSON.stringify(intruder));
    const error = await rejection(store.save("s", sample({ count: 2 })));
    expect(error.code).toBe("context-locked");
    expect(error.message).toContain("this store's lock was removed or taken over");
    expect(decodeProperties((await store.load("s"))!.properties)).toEqual({ count: 1 });
    expect(store.holds("s")).toBe(false);
  });
});
