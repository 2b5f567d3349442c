// Node module-customization hooks: a context-module import (`file:///…/context.ts?moss-compile=N&…`) loads the
// module's TypeScript source (or the MossContext `code` that replaces it) with its locals export appended, compiled
// by esbuild with the module's own tsconfig. Nothing is written to disk; relative imports resolve against the real
// file URL, so imported modules keep their identity.
//
// load-module.ts registers them in-thread with `module.registerHooks` where Node has it (22.15+, 23.5+: Node 24
// deprecates `module.register`, DEP0205, and prints a warning on every use), else off-thread with `module.register`
// (Node 20). The work is synchronous either way (esbuild's buildSync), so both registrations share it.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildSync } from "esbuild";
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

/** The context module a `?moss-compile` URL asks for, compiled; undefined for every other URL. */
function loadContextModule(url: string): LoadResult | undefined {
  const request = url.startsWith("file:") ? parseCompileUrl(url) : undefined;
  if (request === undefined) return undefined;
  const file = fileURLToPath(withoutQuery(url));
  const source = request.source ?? readFileSync(file, "utf8");
  const tsconfig = nearestTsconfig(path.dirname(file));
  const result = buildSync({
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
  });
  return { format: "module", source: result.outputFiles[0]?.text ?? "", shortCircuit: true };
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
    return loadContextModule(url) ?? nextLoad(url, context);
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
  return loadContextModule(url) ?? nextLoad(url, context);
}

function nearestTsconfig(directory: string): string | undefined {
  for (let current = directory; ; current = path.dirname(current)) {
    const candidate = path.join(current, "tsconfig.json");
    if (existsSync(candidate)) return candidate;
    if (path.dirname(current) === current) return undefined;
  }
}
