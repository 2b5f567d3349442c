// What a CLI command's module work read, so that a kept result (engine/cli/result-cache.ts) is used only while every
// one of those inputs is as it was: the files it read or probed through `node:fs` (the module's hooks, a host setup
// file and whatever they call), the folders it listed, the modules it loaded (ES modules through moss-ts's module
// hooks, CommonJS ones through `require`), and the warnings Node printed meanwhile (replayed with the kept result).
import fs from "node:fs";
import { createRequire, syncBuiltinESMExports } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadCompiler } from "./load-compiler.ts";

/** How a path was read: its content (or, for a folder, that it is one) or its listing. */
export type ReadKind = "content" | "listing";

/** A warning Node printed (`process.emitWarning`), replayed when a kept result answers instead. */
export interface KeptWarning {
  message: string;
  name: string;
  code?: string;
}

/** What a tracked stretch of work read and printed. */
export interface TrackedReads {
  /** Each path read, with how. */
  reads: Map<string, ReadKind>;
  warnings: KeptWarning[];
  /** Whether the work wrote to the console itself (a result that prints cannot be replayed: it is not kept). */
  printed: boolean;
}

const SYNC_READS = [
  "readFileSync",
  "existsSync",
  "statSync",
  "lstatSync",
  "accessSync",
  "openSync",
  "realpathSync",
] as const;
const CALLBACK_READS = ["readFile", "exists", "stat", "lstat", "access", "open", "realpath"] as const;
const PROMISE_READS = ["readFile", "stat", "lstat", "access", "open", "realpath"] as const;
const CONSOLE_METHODS = ["log", "info", "warn", "error", "debug", "trace", "dir", "table"] as const;
const require = createRequire(import.meta.url);

/** The absolute path a `node:fs` call names (a string, Buffer or file URL); undefined for a descriptor. */
function pathOf(target: unknown): string | undefined {
  if (typeof target === "string") return path.resolve(target);
  if (target instanceof URL && target.protocol === "file:") return fileURLToPath(target);
  if (Buffer.isBuffer(target)) return path.resolve(target.toString());
  return undefined;
}

/**
 * Runs `work` while recording what it reads: `node:fs` reads and probes, folder listings, modules loaded, Node's
 * warnings and console output. The `node:fs` functions are wrapped for the duration only (and restored, also when
 * `work` throws). Returns `work`'s value and what was read. The modules loaded are the compiler's to count (its module
 * hooks load them): the commands that track have loaded it already, and a kept result is replayed without it.
 */
export async function trackReads<T>(work: () => Promise<T>): Promise<{ value: T; tracked: TrackedReads }> {
  const { loadedModuleFiles, trackModuleLoads } = await loadCompiler();
  const tracked: TrackedReads = { reads: new Map(), warnings: [], printed: false };
  const note = (target: unknown, kind: ReadKind): void => {
    const file = pathOf(target);
    if (file !== undefined && tracked.reads.get(file) !== "listing") tracked.reads.set(file, kind);
  };
  const restore: Array<() => void> = [];
  const wrap = (owner: Record<string, unknown>, name: string, kind: ReadKind): void => {
    const original = owner[name];
    if (typeof original !== "function") return;
    const wrapper = function (this: unknown, target: unknown, ...rest: unknown[]) {
      note(target, kind);
      return (original as (...parameters: unknown[]) => unknown).call(this, target, ...rest);
    };
    // What hangs on the function stays reachable (`realpathSync.native`, `exists`'s promisified form).
    for (const key of Reflect.ownKeys(original)) {
      if (key === "length" || key === "name" || key === "prototype") continue;
      Object.defineProperty(wrapper, key, Object.getOwnPropertyDescriptor(original, key)!);
    }
    owner[name] = wrapper;
    restore.push(() => {
      owner[name] = original;
    });
  };
  const fsObject = fs as unknown as Record<string, unknown>;
  const promises = fs.promises as unknown as Record<string, unknown>;
  for (const name of SYNC_READS) wrap(fsObject, name, "content");
  for (const name of CALLBACK_READS) wrap(fsObject, name, "content");
  for (const name of PROMISE_READS) wrap(promises, name, "content");
  wrap(fsObject, "readdirSync", "listing");
  wrap(fsObject, "readdir", "listing");
  wrap(fsObject, "opendirSync", "listing");
  wrap(fsObject, "opendir", "listing");
  wrap(promises, "readdir", "listing");
  wrap(promises, "opendir", "listing");
  const consoleObject = console as unknown as Record<string, unknown>;
  for (const name of CONSOLE_METHODS) {
    const original = consoleObject[name];
    if (typeof original !== "function") continue;
    consoleObject[name] = function (this: unknown, ...parameters: unknown[]) {
      tracked.printed = true;
      return (original as (...values: unknown[]) => unknown).apply(this, parameters);
    };
    restore.push(() => {
      consoleObject[name] = original;
    });
  }
  const onWarning = (warning: Error & { code?: string }): void => {
    tracked.warnings.push({
      message: warning.message,
      name: warning.name,
      ...(warning.code === undefined ? {} : { code: warning.code }),
    });
  };
  process.on("warning", onWarning);
  // `import { readFileSync } from "node:fs"` sees the wrapped functions too.
  syncBuiltinESMExports();
  const required = new Set(Object.keys(require.cache));
  loadedModuleFiles();
  trackModuleLoads(true);
  try {
    const value = await work();
    // Warnings are emitted on the next tick: let them arrive.
    await new Promise((resolve) => setImmediate(resolve));
    for (const file of loadedModuleFiles()) note(file, "content");
    for (const file of Object.keys(require.cache)) if (!required.has(file)) note(file, "content");
    return { value, tracked };
  } finally {
    trackModuleLoads(false);
    loadedModuleFiles();
    process.off("warning", onWarning);
    for (const undo of restore.reverse()) undo();
    syncBuiltinESMExports();
  }
}

/** Replays kept warnings as Node printed them when the result was made. */
export function replayWarnings(warnings: readonly KeptWarning[]): void {
  for (const warning of warnings) {
    process.emitWarning(warning.message, {
      type: warning.name,
      ...(warning.code === undefined ? {} : { code: warning.code }),
    });
  }
}
