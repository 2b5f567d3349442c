// Node module-customization hooks (registered by load-module.ts with `module.register`): a context-module import
// (`file:///…/context.ts?moss-compile=N&…`) loads the module's TypeScript source (or the MossContext `code` that
// replaces it) with its locals export appended, compiled by esbuild with the module's own tsconfig. Nothing is
// written to disk; relative imports resolve against the real file URL, so imported modules keep their identity.
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseCompileUrl, withLocalsExport, withoutQuery } from "./module-url.ts";

interface LoadResult {
  format?: string;
  source?: string | ArrayBuffer | Uint8Array;
  shortCircuit?: boolean;
}
type NextLoad = (url: string, context?: Record<string, unknown>) => Promise<LoadResult>;

const LOADERS: Record<string, "ts" | "tsx" | "js" | "jsx"> = {
  ".ts": "ts",
  ".mts": "ts",
  ".cts": "ts",
  ".tsx": "tsx",
  ".js": "js",
  ".mjs": "js",
  ".jsx": "jsx",
};

type NextResolve = (specifier: string, context?: Record<string, unknown>) => Promise<unknown>;

/** Whether the engine runs from its TypeScript sources (a checkout) rather than from its build (dist/). */
const FROM_SOURCES = import.meta.url.endsWith(".ts");
const SOURCE_CONDITION = "moss-ts-source";

/**
 * The `resolve` hook: when the engine runs from its sources, `import … from "moss-ts"` in a context module resolves
 * to those same sources (package.json's `moss-ts-source` condition), never to a dist/ build that may be missing or
 * stale: the module's `Moss` base class is then the one the running engine knows.
 */
export async function resolve(
  specifier: string,
  context: Record<string, unknown>,
  nextResolve: NextResolve,
): Promise<unknown> {
  if (FROM_SOURCES && (specifier === "moss-ts" || specifier.startsWith("moss-ts/"))) {
    const conditions = (context.conditions as string[] | undefined) ?? [];
    if (!conditions.includes(SOURCE_CONDITION)) {
      return nextResolve(specifier, { ...context, conditions: [...conditions, SOURCE_CONDITION] });
    }
  }
  return nextResolve(specifier, context);
}

/** The `load` hook: context-module imports are handled here, everything else goes on down the chain. */
export async function load(
  url: string,
  context: Record<string, unknown>,
  nextLoad: NextLoad,
): Promise<LoadResult> {
  const request = url.startsWith("file:") ? parseCompileUrl(url) : undefined;
  if (request === undefined) return nextLoad(url, context);
  const file = fileURLToPath(withoutQuery(url));
  const source = request.source ?? (await readFile(file, "utf8"));
  const { build } = await import("esbuild");
  const tsconfig = nearestTsconfig(path.dirname(file));
  const result = await build({
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

function nearestTsconfig(directory: string): string | undefined {
  for (let current = directory; ; current = path.dirname(current)) {
    const candidate = path.join(current, "tsconfig.json");
    if (existsSync(candidate)) return candidate;
    if (path.dirname(current) === current) return undefined;
  }
}
