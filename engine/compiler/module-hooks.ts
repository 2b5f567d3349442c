// Node module-customization hooks: a context-module import (`file:///…/context.ts?moss-compile=N&…`) loads the
// module's TypeScript source (or the MossContext `code` that replaces it) with its locals export appended, compiled
// by esbuild with the module's own tsconfig. Nothing is written to disk; relative imports resolve against the real
// file URL, so imported modules keep their identity.
//
// load-module.ts registers them in-thread with `module.registerHooks` where Node has it (22.15+, 23.5+: Node 24
// deprecates `module.register`, DEP0205, and prints a warning on every use), else off-thread with `module.register`
// (Node 20). In-thread the compile is synchronous (esbuild's buildSync, the service tsx's in-thread hooks use too);
// off-thread it is esbuild's asynchronous build, on the one service tsx's off-thread loader uses (a buildSync there
// started a second service and a worker thread for it, ~70 ms). Both go through ../esbuild-service.ts, which stops
// the services once nothing loads (the loaders after these hooks, tsx, compile under their hold).
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { MessagePort } from "node:worker_threads";
import type { BuildOptions, BuildResult } from "esbuild";
import { holdEsbuild, withEsbuild } from "../esbuild-service.ts";
import { parseCompileUrl, withLocalsExport, withoutQuery } from "./module-url.ts";

interface LoadResult {
  format?: string | null;
  source?: string | ArrayBuffer | Uint8Array;
  shortCircuit?: boolean;
}

const LOADERS: Record<string, "ts" | "tsx" | "js" | "jsx"> = {
  ".ts": "ts",
  ".mts": "ts",
  ".cts": "ts",
  ".tsx": "tsx",
  ".js": "js",
  ".mjs": "js",
  ".jsx": "jsx",
};

/** Whether the engine runs from its TypeScript sources (a checkout) rather than from its build (dist/). */
const FROM_SOURCES = import.meta.url.endsWith(".ts");
const SOURCE_CONDITION = "moss-ts-source";

/**
 * The resolve context to use for `specifier`: when the engine runs from its sources, `import … from "moss-ts"` in a
 * context module resolves to those same sources (package.json's `moss-ts-source` condition), never to a dist/
 * build that may be missing or stale: the module's `Moss` base class is then the one the running engine knows.
 */
function resolveContext(specifier: string, context: Record<string, unknown>): Record<string, unknown> {
  if (FROM_SOURCES && (specifier === "moss-ts" || specifier.startsWith("moss-ts/"))) {
    const conditions = (context.conditions as string[] | undefined) ?? [];
    if (!conditions.includes(SOURCE_CONDITION))
      return { ...context, conditions: [...conditions, SOURCE_CONDITION] };
  }
  return context;
}

/**
 * The esbuild options that compile the context module a `?moss-compile` URL asks for; undefined for every other URL.
 */
function contextModuleBuild(url: string): (BuildOptions & { write: false }) | undefined {
  const request = url.startsWith("file:") ? parseCompileUrl(url) : undefined;
  if (request === undefined) return undefined;
  const file = fileURLToPath(withoutQuery(url));
  const source = request.source ?? readFileSync(file, "utf8");
  const tsconfig = nearestTsconfig(path.dirname(file));
  return {
    stdin: {
      contents: withLocalsExport(source, request.names),
      sourcefile: file,
      resolveDir: path.dirname(file),
      loader: LOADERS[path.extname(file)] ?? "ts",
    },
    ...(tsconfig === undefined ? {} : { tsconfig }),
    bundle: false,
    write: false,
    format: "esm",
    platform: "node",
    target: `node${process.versions.node}`,
    sourcemap: "inline",
    logLevel: "silent",
  };
}

function compiled(result: BuildResult): LoadResult {
  return { format: "module", source: result.outputFiles?.[0]?.text ?? "", shortCircuit: true };
}

/** Where the hooks report each file URL they load (see load-module.ts's `loadedModuleFiles`). */
const LOADED_FILES = Symbol.for("moss-ts.loaded-module-files");
/** The flag (one Int32 in shared memory) that is 1 while a CLI command tracks what it loads. */
const TRACKING_FLAG = Symbol.for("moss-ts.module-load-tracking");
/** Off-thread: the port `initialize` was given, to which each loaded file URL is posted, and the shared flag. */
let loadedPort: MessagePort | undefined;
let trackingFlag: Int32Array | undefined;

/**
 * Reports a loaded `file:` URL (its query dropped) while loads are tracked (never otherwise: a long-running server
 * keeps no list): in-thread to the shared list, off-thread through the port.
 */
function reportLoaded(url: string): void {
  const flag = trackingFlag ?? (globalThis as Record<symbol, Int32Array | undefined>)[TRACKING_FLAG];
  if (flag === undefined || Atomics.load(flag, 0) !== 1 || !url.startsWith("file:")) return;
  const file = withoutQuery(url);
  if (loadedPort !== undefined) loadedPort.postMessage(file);
  else ((globalThis as Record<symbol, string[] | undefined>)[LOADED_FILES] ??= []).push(file);
}

/** The off-thread hooks' start (`module.register`'s `data`): the port loaded file URLs are posted to, and the flag. */
export function initialize(data: { loadedPort?: MessagePort; trackingFlag?: Int32Array } | undefined): void {
  loadedPort = data?.loadedPort;
  trackingFlag = data?.trackingFlag;
}

/** The in-thread hooks for `module.registerHooks`. */
export const syncHooks = {
  resolve(
    specifier: string,
    context: Record<string, unknown>,
    nextResolve: (specifier: string, context?: Record<string, unknown>) => unknown,
  ): unknown {
    return nextResolve(specifier, resolveContext(specifier, context));
  },
  load(
    url: string,
    context: Record<string, unknown>,
    nextLoad: (url: string, context?: Record<string, unknown>) => LoadResult,
  ): LoadResult {
    reportLoaded(url);
    const build = contextModuleBuild(url);
    if (build !== undefined) return compiled(withEsbuild((esbuild) => esbuild.buildSync(build)));
    const release = holdEsbuild();
    try {
      return nextLoad(url, context);
    } finally {
      release();
    }
  },
};

/** The off-thread `resolve` hook for `module.register` (this file is the module it registers). */
export async function resolve(
  specifier: string,
  context: Record<string, unknown>,
  nextResolve: (specifier: string, context?: Record<string, unknown>) => Promise<unknown>,
): Promise<unknown> {
  return nextResolve(specifier, resolveContext(specifier, context));
}

/** The off-thread `load` hook for `module.register`: context-module imports here, the rest down the chain. */
export async function load(
  url: string,
  context: Record<string, unknown>,
  nextLoad: (url: string, context?: Record<string, unknown>) => Promise<LoadResult>,
): Promise<LoadResult> {
  reportLoaded(url);
  const build = contextModuleBuild(url);
  if (build !== undefined) return compiled(await withEsbuild((esbuild) => esbuild.build(build)));
  const release = holdEsbuild();
  try {
    return await nextLoad(url, context);
  } finally {
    release();
  }
}

function nearestTsconfig(directory: string): string | undefined {
  for (let current = directory; ; current = path.dirname(current)) {
    const candidate = path.join(current, "tsconfig.json");
    if (existsSync(candidate)) return candidate;
    if (path.dirname(current) === current) return undefined;
  }
}
