import nodeModule from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MessageChannel, type MessagePort, receiveMessageOnPort } from "node:worker_threads";
import { MossError } from "../errors.ts";
import { escapeRegExp } from "../escape-reg-exp.ts";
import { esmPackageProblem } from "./esm-package.ts";
import { compileUrl, LOCALS_EXPORT } from "./module-url.ts";

const TSX_REGISTERED = Symbol.for("moss-ts.tsx-registered");
const HOOKS_REGISTERED = Symbol.for("moss-ts.module-hooks-registered");
const LOADED_FILES = Symbol.for("moss-ts.loaded-module-files");
const TRACKING_FLAG = Symbol.for("moss-ts.module-load-tracking");
/** 1 while loads are tracked (`trackModuleLoads`), read by the module hooks in this thread or theirs. */
const trackingFlag = new Int32Array(new SharedArrayBuffer(4));
(globalThis as Record<symbol, Int32Array | undefined>)[TRACKING_FLAG] ??= trackingFlag;
let loadCounter = 0;
/** What a test that compiles a context module under vitest needs. */
const VITE_PLUGIN_HINT =
  'Under vitest, add mossVitePlugin() to plugins in vitest.config.ts: import { mossVitePlugin } from "moss-ts"; export default defineConfig({ plugins: [mossVitePlugin()] }).';

/**
 * True inside a vitest test worker, where Vite serves modules. `VITEST` alone is not enough: child processes a
 * test starts inherit it, and a plain `node` child has no Vite, so it needs moss-ts's own loaders.
 */
function underVitest(): boolean {
  return Boolean(process.env.VITEST) && "__vitest_worker__" in globalThis;
}

/** The module's namespace plus its top-level values (exported or not), as loaded on the host. */
export interface LoadedModule {
  namespace: Record<string, unknown>;
  locals: Record<string, unknown>;
}

/**
 * Loads a context module on the host, once per call, without writing anything: the real file URL is imported with
 * a `?moss-compile=N` query (a fresh module instance per compile) that the module hooks (or, under vitest, the Vite
 * plugin) serve as the module's source plus an export of its named top-level values. Relative imports and
 * node_modules resolve as they would for the module itself, and imported files keep their identity (the `Ball`
 * class the host binds is the one the module sees).
 */
export async function loadModule(
  modulePath: string,
  source: string,
  valueNames: string[],
  options: { sourceOverridden?: boolean } = {},
): Promise<LoadedModule> {
  await ensureModuleLoaders();
  const url = compileUrl(pathToFileURL(modulePath).href, ++loadCounter, {
    names: valueNames,
    ...(options.sourceOverridden ? { source } : {}),
  });
  let namespace: Record<string, unknown>;
  try {
    namespace = (await import(/* @vite-ignore */ url)) as Record<string, unknown>;
  } catch (error) {
    throw await loadError(error, modulePath, source, url);
  }
  if (!(LOCALS_EXPORT in namespace)) {
    throw new MossError(
      "module-load",
      `${modulePath}: loading the context module failed: it was loaded without its locals export, so the loader that served it is not moss-ts's${underVitest() ? `. ${VITE_PLUGIN_HINT}` : ""}`,
      { file: modulePath },
    );
  }
  return { namespace, locals: namespace[LOCALS_EXPORT] as Record<string, unknown> };
}

async function loadError(
  error: unknown,
  modulePath: string,
  source: string,
  url: string,
): Promise<MossError> {
  const cause = error instanceof Error ? error : new Error(String(error));
  const bare = url.slice(0, url.indexOf("?"));
  // Node 24's CommonJS loader names the file by its path with the query (`/dir/context.ts?moss-compile=1&…`).
  const pathWithQuery = new RegExp(`${escapeRegExp(fileURLToPath(bare))}\\?[^'"\\s]*`, "g");
  const clean = (text: string) =>
    text.replaceAll(url, modulePath).replaceAll(pathWithQuery, modulePath).replaceAll(bare, modulePath);
  const stack = clean(cause.stack ?? "");
  const frame = stack.match(new RegExp(`${escapeRegExp(modulePath)}:(\\d+):(\\d+)`));
  // A link error (an import naming an export its module lacks) has no line:column frame: find the import.
  const linked = frame
    ? undefined
    : (missingExportLocation(cause.message, source) ?? missingPackageLocation(cause.message, source));
  const line = frame ? Number(frame[1]) : linked?.line;
  const column = frame ? Number(frame[2]) : linked?.column;
  const where = line ? `${modulePath}:${line}:${column}` : modulePath;
  const sourceLine = line ? `\n\n> ${line} | ${source.split("\n")[line - 1] ?? ""}` : "";
  const packageProblem = await esmPackageProblem(modulePath);
  // Under vitest without the plugin, an installed moss-ts is run by Node itself, whose import() knows no `.ts`.
  const vitePlugin =
    underVitest() && (cause as { code?: unknown }).code === "ERR_UNKNOWN_FILE_EXTENSION"
      ? VITE_PLUGIN_HINT
      : undefined;
  const hint = [packageProblem, vitePlugin]
    .filter((text) => text !== undefined)
    .map((text) => `\n\n${text}`)
    .join("");
  // In a CommonJS package Node's own error is a consequence ("does not provide an export", ENOENT): the cause first.
  const lead = packageProblem === undefined ? "" : "it is not in an ES module package (below); Node said: ";
  return new MossError(
    "module-load",
    `${where} - loading the context module failed: ${lead}${cause.name}: ${clean(cause.message)}${sourceLine}${hint}`,
    { file: modulePath, line, column },
    { cause },
  );
}

/**
 * Where the module imports a name its source module does not export (V8's "The requested module 'X' does not
 * provide an export named 'Y'"): the name inside the import's braces, else the import's specifier (a default
 * import). 1-based line and column.
 */
function missingExportLocation(
  message: string,
  source: string,
): { line: number; column: number } | undefined {
  const missing = /The requested module '([^']+)' does not provide an export named '([^']+)'/.exec(message);
  if (!missing) return undefined;
  const [, specifier = "", name = ""] = missing;
  const declaration = new RegExp(
    `\\bimport\\s+(?:type\\s+)?([\\w$]+\\s*,?\\s*)?(\\{[^}]*\\})?\\s*from\\s*(["'])${escapeRegExp(specifier)}\\3`,
    "g",
  );
  for (const found of source.matchAll(declaration)) {
    const braces = found[2];
    const inBraces =
      braces === undefined ? -1 : braces.search(new RegExp(`(^|[^\\w$])${escapeRegExp(name)}(?![\\w$])`));
    let offset: number;
    if (braces !== undefined && inBraces >= 0) {
      const lead = /^[^\w$]?/.exec(braces.slice(inBraces))?.[0].length ?? 0;
      offset = found.index + found[0].indexOf(braces) + inBraces + lead;
    } else if (name === "default" && found[1] !== undefined) {
      offset = found.index + found[0].indexOf(found[1]);
    } else continue;
    const before = source.slice(0, offset).split("\n");
    return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1 };
  }
  return undefined;
}

/** Where the module imports a package Node cannot find ("Cannot find package 'X' imported from …"): its specifier. */
function missingPackageLocation(
  message: string,
  source: string,
): { line: number; column: number } | undefined {
  const missing = /Cannot find package '([^']+)' imported from/.exec(message);
  if (!missing) return undefined;
  const name = escapeRegExp(missing[1] ?? "");
  const specifier = new RegExp(`\\b(?:from|import)\\s*(["'])${name}(?:/[^"']*)?\\1`).exec(source);
  if (!specifier) return undefined;
  const offset = specifier.index + specifier[0].indexOf(specifier[1] ?? "");
  const before = source.slice(0, offset).split("\n");
  return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1 };
}

/** Off-thread hooks (Node 20): the port they post each loaded file URL to. */
let loadedPort: MessagePort | undefined;
let loadedReported = 0;

/** Starts (true) or stops recording the files the module hooks load, for `loadedModuleFiles`. */
export function trackModuleLoads(on: boolean): void {
  const flag = (globalThis as Record<symbol, Int32Array | undefined>)[TRACKING_FLAG] ?? trackingFlag;
  Atomics.store(flag, 0, on ? 1 : 0);
  if (flag !== trackingFlag) Atomics.store(trackingFlag, 0, on ? 1 : 0);
}

/**
 * The files (absolute paths) the module hooks loaded while tracked (`trackModuleLoads`) since the last call: every
 * ES module (and CommonJS module imported from one) a context module, a host setup file or their imports brought
 * in. Only the URLs the hooks have reported by now (off-thread hooks post them: each load is reported before it
 * returns).
 */
export function loadedModuleFiles(): string[] {
  const files: string[] = [];
  if (loadedPort !== undefined) {
    for (
      let message = receiveMessageOnPort(loadedPort);
      message;
      message = receiveMessageOnPort(loadedPort)
    ) {
      files.push(fileURLToPath(message.message as string));
    }
    return files;
  }
  const shared = (globalThis as Record<symbol, string[] | undefined>)[LOADED_FILES] ?? [];
  for (const url of shared.slice(loadedReported)) files.push(fileURLToPath(url));
  loadedReported = shared.length;
  return files;
}

/**
 * Outside vitest (whose Vite plugin in vitest.config.ts serves context modules itself), registers tsx's ESM loader
 * (for the TypeScript files a module imports) and then the module hooks, once per process.
 */
export async function ensureModuleLoaders(): Promise<void> {
  const registry = globalThis as Record<symbol, unknown>;
  if (underVitest()) return;
  if (!registry[TSX_REGISTERED]) {
    const { register: registerTsx } = await import("tsx/esm/api");
    registerTsx();
    registry[TSX_REGISTERED] = true;
  }
  if (!registry[HOOKS_REGISTERED]) {
    // In-thread hooks where Node has them (module.register is deprecated from Node 24 on), else off-thread ones.
    const { registerHooks } = nodeModule as { registerHooks?: (hooks: object) => unknown };
    if (typeof registerHooks === "function") {
      const { syncHooks } = await import("./module-hooks.ts");
      registerHooks(syncHooks);
    } else {
      const extension = path.extname(new URL(import.meta.url).pathname);
      const { port1, port2 } = new MessageChannel();
      port1.unref();
      loadedPort = port1;
      nodeModule.register(new URL(`./module-hooks${extension}`, import.meta.url), {
        data: { loadedPort: port2, trackingFlag },
        transferList: [port2],
      });
    }
    registry[HOOKS_REGISTERED] = true;
  }
}
