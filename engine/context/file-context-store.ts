import { randomBytes } from "node:crypto";
import { link, mkdir, readdir, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { dirname, join, resolve } from "node:path";
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
      throw lockedError(
        sessionLock(sessionId),
        lockPath,
        owner,
        "this store's lock was removed or taken over",
      );
    }
    const nonce = await takeLockFile(
      lockPath,
      sessionLock(sessionId),
      "another FileContextStore of this process holds it",
    );
    this.#held.set(sessionId, { path: lockPath, nonce });
  }

  async #release(sessionId: string): Promise<void> {
    const held = this.#held.get(sessionId);
    if (held === undefined) return;
    this.#forget(sessionId);
    await dropLockFile(held.path, held.nonce);
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

/** What a lock guards: named in its error as `Session "id"` or `Context file ctx.json`, with details to match. */
interface LockSubject {
  name: string;
  details: Record<string, unknown>;
}

function sessionLock(sessionId: string): LockSubject {
  return { name: `Session "${sessionId}"`, details: { sessionId } };
}

/**
 * Takes `lockPath` for one writer: an exclusive lock file recording this process's pid (a dead owner's on this host
 * is taken over); a live owner fails with MossError `context-locked` naming it. Returns the lock's nonce.
 */
async function takeLockFile(lockPath: string, subject: LockSubject, heldHere: string): Promise<string> {
  if (heldInProcess.has(lockPath)) throw lockedError(subject, lockPath, undefined, heldHere);
  await mkdir(dirname(lockPath), { recursive: true });
  for (let attempt = 0; attempt < 5; attempt++) {
    const owner: LockOwner = {
      pid: process.pid,
      hostname: hostname(),
      nonce: randomBytes(12).toString("hex"),
      acquiredAt: new Date().toISOString(),
    };
    if (await createLock(lockPath, owner)) {
      heldInProcess.set(lockPath, owner.nonce);
      return owner.nonce;
    }
    const existing = await readLockText(lockPath);
    if (existing === undefined) continue;
    const current = parseLock(existing);
    if (current !== "unreadable" && isAlive(current, lockPath)) throw lockedError(subject, lockPath, current);
    await takeOver(lockPath, existing);
  }
  throw lockedError(subject, lockPath, undefined, "other writers kept taking it");
}

/** Removes a lock file taken with `nonce`, only if it is still that one. */
async function dropLockFile(lockPath: string, nonce: string): Promise<void> {
  if (heldInProcess.get(lockPath) === nonce) heldInProcess.delete(lockPath);
  const owner = await readLock(lockPath);
  if (owner !== undefined && owner !== "unreadable" && owner.nonce === nonce) {
    await unlink(lockPath).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "ENOENT") throw error;
    });
  }
}

/**
 * Makes this process the only writer of the MossContext file `file` (its lock file `<file>.lock`, as a session's
 * lock) until the returned release runs, or throws MossError `context-locked` naming the process that holds it.
 * Where no lock file can be written there is nothing to hold.
 */
export async function lockContextFile(file: string): Promise<() => Promise<void>> {
  const lockPath = `${resolve(file)}.lock`;
  let nonce: string;
  try {
    nonce = await takeLockFile(
      lockPath,
      { name: `Context file ${file}`, details: { file } },
      "this process uses it already",
    );
  } catch (error) {
    if (MossError.is(error)) throw error;
    // No lock file can be written beside it (its folder is a file, read-only, …): no other run can save it either,
    // and this run's save reports the cause with the file's name after its output.
    return async () => {};
  }
  return () => dropLockFile(lockPath, nonce);
}

function lockedError(
  subject: LockSubject,
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
    `${subject.name} is locked${by} (${lockPath})${why === undefined ? "" : `: ${why}`}; another writer is active`,
    { ...subject.details, lockPath, owner },
  );
}
