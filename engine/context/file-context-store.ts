import { randomBytes } from "node:crypto";
import { link, mkdir, readdir, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { MossError } from "../errors.ts";
import type { MossContext } from "../types.ts";
import { readContextFile, type WriteContextReport, writeContextFile } from "./context-file.ts";
import type { ContextStore } from "./context-store.ts";

const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;
const CONTEXT_FILE = /^([A-Za-z0-9][A-Za-z0-9_-]{0,127})\.json$/;

/** Lock paths held by any FileContextStore of this process, with the holder's nonce. */
const heldInProcess = new Map<string, string>();

/** What a lock file records about its owner. */
export interface LockOwner {
  pid: number;
  hostname: string;
  nonce: string;
  acquiredAt: string;
}

/**
 * The embedded ContextStore: one JSON file per session in a directory (`<sessionId>.json`).
 *
 * - Writes are atomic (temp file in the same directory, fsync, rename); a crash leaves at most a `.…tmp` file.
 * - One writer per session: an exclusive lock file `<sessionId>.lock` recording the owner's pid; a lock whose pid is
 *   dead (same host) is taken over; a live one fails with MossError `context-locked`. A run holds it from before
 *   any code runs to its last save (`acquire` … `release`): a session is locked for the duration of a run, not for
 *   the lifetime of a store. `save`/`delete` outside a run take it for their own duration only. `load` and `list`
 *   take no lock.
 * - A corrupt file fails `load` with MossError `context-corrupt`; `save` never overwrites it but moves it aside
 *   to `<sessionId>.corrupt-<timestamp>.json` first and reports where (`movedCorruptTo`).
 * - Session ids are 1–128 letters, digits, `_` or `-` (starting with a letter or digit): no path can be formed.
 */
export class FileContextStore implements ContextStore {
  /** The absolute directory holding the session files. */
  readonly directory: string;
  readonly #held = new Map<string, { path: string; nonce: string }>();
  readonly #queues = new Map<string, Promise<unknown>>();

  constructor(directory: string) {
    this.directory = resolve(directory);
  }

  /** The path of a session's context file. */
  contextPath(sessionId: string): string {
    return join(this.directory, `${validSessionId(sessionId)}.json`);
  }

  /** The saved context of a session, or `undefined`; a corrupt file throws MossError `context-corrupt`. */
  async load(sessionId: string): Promise<MossContext | undefined> {
    return readContextFile(this.contextPath(sessionId));
  }

  /**
   * Writes a session's context atomically (moving a corrupt file aside first), under the session's lock: the one
   * this store holds for a run, else taken for this write only.
   */
  async save(sessionId: string, context: MossContext): Promise<WriteContextReport> {
    const path = this.contextPath(sessionId);
    return this.#serialize(sessionId, () => this.#locked(sessionId, () => writeContextFile(path, context)));
  }

  /** Takes the session's lock if needed, deletes its context file and releases the lock; resolves whether it existed. */
  async delete(sessionId: string): Promise<boolean> {
    const path = this.contextPath(sessionId);
    return this.#serialize(sessionId, async () => {
      const held = this.#held.has(sessionId);
      await this.#acquire(sessionId);
      try {
        await unlink(path);
        return true;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
        throw error;
      } finally {
        if (!held) await this.#release(sessionId);
      }
    });
  }

  /** The ids of the sessions with a context file, sorted; corrupt copies and temp files are not listed. */
  async list(): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.directory);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw error;
    }
    return names
      .map((name) => CONTEXT_FILE.exec(name)?.[1])
      .filter((id): id is string => id !== undefined)
      .sort();
  }

  /**
   * Makes this store the session's only writer until `release` (a run takes it before any code runs), or throws
   * MossError `context-locked` naming the owner. Already holding it, checks the lock file is still ours.
   */
  async acquire(sessionId: string): Promise<void> {
    validSessionId(sessionId);
    return this.#serialize(sessionId, () => this.#acquire(sessionId));
  }

  /** Whether this store holds the session's lock. */
  holds(sessionId: string): boolean {
    return this.#held.has(sessionId);
  }

  /** Releases the session's lock if this store holds it (the lock file is removed only if it is still ours). */
  async release(sessionId: string): Promise<void> {
    return this.#serialize(sessionId, () => this.#release(sessionId));
  }

  /** Releases every lock this store holds. Idempotent; the store can still be used afterwards. */
  async close(): Promise<void> {
    for (const sessionId of [...this.#held.keys()]) await this.release(sessionId);
  }

  /** Runs `operation` under the session's lock: the one this store holds, else taken for the operation only. */
  async #locked<T>(sessionId: string, operation: () => Promise<T>): Promise<T> {
    const held = this.#held.has(sessionId);
    await this.#acquire(sessionId);
    if (held) return operation();
    try {
      return await operation();
    } finally {
      await this.#release(sessionId);
    }
  }

  /** Runs one operation on a session at a time, in call order, so concurrent calls of this store never race. */
  #serialize<T>(sessionId: string, operation: () => Promise<T>): Promise<T> {
    const previous = this.#queues.get(sessionId) ?? Promise.resolve();
    const result = previous.then(operation, operation);
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    this.#queues.set(sessionId, settled);
    void settled.then(() => {
      if (this.#queues.get(sessionId) === settled) this.#queues.delete(sessionId);
    });
    return result;
  }

  async #acquire(sessionId: string): Promise<void> {
    const lockPath = join(this.directory, `${validSessionId(sessionId)}.lock`);
    const held = this.#held.get(sessionId);
    if (held !== undefined) {
      const owner = await readLock(lockPath);
      if (owner !== undefined && owner !== "unreadable" && owner.nonce === held.nonce) return;
      this.#forget(sessionId);
      throw lockedError(sessionId, lockPath, owner, "this store's lock was removed or taken over");
    }
    if (heldInProcess.has(lockPath)) {
      throw lockedError(sessionId, lockPath, undefined, "another FileContextStore of this process holds it");
    }
    await mkdir(this.directory, { recursive: true });
    for (let attempt = 0; attempt < 5; attempt++) {
      const owner: LockOwner = {
        pid: process.pid,
        hostname: hostname(),
        nonce: randomBytes(12).toString("hex"),
        acquiredAt: new Date().toISOString(),
      };
      if (await createLock(lockPath, owner)) {
        this.#held.set(sessionId, { path: lockPath, nonce: owner.nonce });
        heldInProcess.set(lockPath, owner.nonce);
        return;
      }
      const existing = await readLockText(lockPath);
      if (existing === undefined) continue;
      const current = parseLock(existing);
      if (current !== "unreadable" && isAlive(current, lockPath))
        throw lockedError(sessionId, lockPath, current);
      await takeOver(lockPath, existing);
    }
    throw lockedError(sessionId, lockPath, undefined, "other writers kept taking it");
  }

  async #release(sessionId: string): Promise<void> {
    const held = this.#held.get(sessionId);
    if (held === undefined) return;
    this.#forget(sessionId);
    const owner = await readLock(held.path);
    if (owner !== undefined && owner !== "unreadable" && owner.nonce === held.nonce) {
      await unlink(held.path).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== "ENOENT") throw error;
      });
    }
  }

  #forget(sessionId: string): void {
    const held = this.#held.get(sessionId);
    this.#held.delete(sessionId);
    if (held !== undefined && heldInProcess.get(held.path) === held.nonce) heldInProcess.delete(held.path);
  }
}

/** Checks a session id (1-128 letters, digits, `_`, `-`; no path can be formed from it) and returns it. */
export function validSessionId(sessionId: string): string {
  if (typeof sessionId !== "string" || !SESSION_ID.test(sessionId)) {
    throw new MossError(
      "invalid-argument",
      `Invalid session id ${JSON.stringify(sessionId)}: use 1-128 letters, digits, "_" or "-", starting with a letter or digit`,
      { sessionId },
    );
  }
  return sessionId;
}

/** Creates the lock file with its full content in one step (link of a written temp file); false if it exists. */
async function createLock(lockPath: string, owner: LockOwner): Promise<boolean> {
  const temporary = `${lockPath}.${owner.nonce}.tmp`;
  await writeFile(temporary, `${JSON.stringify(owner)}\n`, { flag: "wx" });
  try {
    await link(temporary, lockPath);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  } finally {
    await unlink(temporary).catch(() => undefined);
  }
}

async function readLockText(lockPath: string): Promise<string | undefined> {
  try {
    return await readFile(lockPath, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

async function readLock(lockPath: string): Promise<LockOwner | "unreadable" | undefined> {
  const text = await readLockText(lockPath);
  return text === undefined ? undefined : parseLock(text);
}

function parseLock(text: string): LockOwner | "unreadable" {
  try {
    const owner = JSON.parse(text) as Partial<LockOwner>;
    if (
      Number.isInteger(owner.pid) &&
      typeof owner.hostname === "string" &&
      typeof owner.nonce === "string"
    ) {
      return owner as LockOwner;
    }
  } catch {}
  return "unreadable";
}

/** Whether a lock's owner may still be writing: a live pid, another host (cannot tell), or a store of this process. */
function isAlive(owner: LockOwner, lockPath: string): boolean {
  if (owner.hostname !== hostname()) return true;
  if (owner.pid === process.pid) return heldInProcess.get(lockPath) === owner.nonce;
  try {
    process.kill(owner.pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Removes a stale lock, unless another process replaced it meanwhile (then it is put back). */
async function takeOver(lockPath: string, staleText: string): Promise<void> {
  const aside = `${lockPath}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    await rename(lockPath, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  const moved = await readFile(aside, "utf8").catch(() => undefined);
  if (moved !== staleText) await link(aside, lockPath).catch(() => undefined);
  await unlink(aside).catch(() => undefined);
}

function lockedError(
  sessionId: string,
  lockPath: string,
  owner: LockOwner | "unreadable" | undefined,
  why?: string,
) {
  const by =
    owner === undefined || owner === "unreadable"
      ? ""
      : ` by process ${owner.pid} on ${owner.hostname === hostname() ? "this host" : `host ${owner.hostname}`} since ${owner.acquiredAt}`;
  return new MossError(
    "context-locked",
    `Session "${sessionId}" is locked${by} (${lockPath})${why === undefined ? "" : `: ${why}`}; another writer is active`,
    { sessionId, lockPath, owner },
  );
}
