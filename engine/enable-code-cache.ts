// V8's compiled code of TypeScript and ts-morph (~13 MB of JavaScript) kept on disk between CLI runs: a fresh
// process otherwise parses it and compiles every function it calls again, in the main thread and again in each
// type-check worker. The cache lives in this user's private temp folder: cached code runs as moss-ts's own, so a
// file another user could plant must never be read.

import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import module, { createRequire, Module } from "node:module";
import path from "node:path";
import vm from "node:vm";
import { isMainThread } from "node:worker_threads";
import {
  privateTempFolder,
  touchPrivateFile,
  trimPrivateTempFolder,
  writePrivateFile,
} from "./private-temp-folder.ts";

const require = createRequire(import.meta.url);

/** Node ≥ 22.1 caches every module it compiles; older lines lack the API. */
type EnableCompileCache = (directory?: string) => unknown;

let enabled = false;

/**
 * Keeps V8's compiled code of the heavy dependencies (TypeScript, ts-morph) on disk, in this user's private cache
 * folder: Node's own compile cache where it exists (Node ≥ 22.1), else a V8 code cache of each of their files,
 * loaded here before anything imports ts-morph. Call it before ts-morph is imported; `NODE_DISABLE_COMPILE_CACHE=1`
 * turns it off.
 */
export function enableCodeCache(): void {
  if (enabled) return;
  enabled = true;
  if (process.env.NODE_DISABLE_COMPILE_CACHE) return;
  const folder = path.join(privateTempFolder(), "code-cache");
  const enableCompileCache = (module as unknown as { enableCompileCache?: EnableCompileCache })
    .enableCompileCache;
  if (typeof enableCompileCache === "function") {
    enableCompileCache(folder);
    // Node writes its cache itself, not through writePrivateFile: the folder is trimmed here (at most hourly).
    trimPrivateTempFolder();
    return;
  }
  for (const file of tsMorphFiles()) {
    try {
      loadWithCodeCache(file, folder);
    } catch {
      // Without a cache this file (and those after it) load the usual way, when they are first required.
      return;
    }
  }
}

/**
 * Writes what Node's compile cache gathered now rather than when the process ends (Node ≥ 22.10; a no-op before, or
 * where the cache is off). A warm path's process calls it before it tells its client the command ended: after that
 * answer, nothing of the command still writes in the private temp folder.
 */
export function flushCodeCache(): void {
  const flush = (module as unknown as { flushCompileCache?: () => void }).flushCompileCache;
  if (!enabled || typeof flush !== "function") return;
  try {
    flush();
  } catch {
    // A cache that cannot be written is only a slower next start.
  }
}

/** The file of TypeScript that ts-morph requires (its own bundled copy). */
export function typeScriptFile(): string {
  return tsMorphFiles()[0]!;
}

/** TypeScript, @ts-morph/common and ts-morph: CommonJS files each of which requires the one before it. */
function tsMorphFiles(): [typeScript: string, common: string, tsMorph: string] {
  const tsMorph = require.resolve("ts-morph");
  const common = createRequire(tsMorph).resolve("@ts-morph/common");
  return [path.join(path.dirname(common), "typescript.js"), common, tsMorph];
}

/**
 * Evaluates a CommonJS file from a `vm.Script` given the cached code, and registers it as the module `require`
 * finds. The main thread writes the cache at exit when there was none or V8 rejected it (another Node or another
 * version of the file): by then it holds every function the run compiled, which is what the next run saves.
 */
function loadWithCodeCache(file: string, folder: string): void {
  if (require.cache[file] !== undefined) return;
  const source = readFileSync(file, "utf8");
  const { size, mtimeMs } = statSync(file);
  const key = createHash("sha256")
    .update(JSON.stringify([file, size, mtimeMs, process.version, process.arch]))
    .digest("base64url")
    .slice(0, 32);
  const cacheFile = path.join(folder, `${path.basename(file, ".js")}-${key}.bin`);
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(cacheFile);
    touchPrivateFile(cacheFile);
  } catch {}
  const script = new vm.Script(Module.wrap(source), {
    filename: file,
    ...(cachedData === undefined ? {} : { cachedData }),
  });
  const loaded = new Module(file);
  loaded.filename = file;
  loaded.paths = (Module as unknown as { _nodeModulePaths(from: string): string[] })._nodeModulePaths(
    path.dirname(file),
  );
  require.cache[file] = loaded;
  try {
    const wrapper = script.runInThisContext() as (...parameters: unknown[]) => void;
    wrapper.call(loaded.exports, loaded.exports, createRequire(file), loaded, file, path.dirname(file));
    loaded.loaded = true;
  } catch (error) {
    delete require.cache[file];
    throw error;
  }
  if (isMainThread && (cachedData === undefined || script.cachedDataRejected === true)) {
    process.once("exit", () => writeCodeCache(cacheFile, script));
  }
}

function writeCodeCache(cacheFile: string, script: vm.Script): void {
  try {
    writePrivateFile(cacheFile, script.createCachedData());
  } catch {}
}
