import { unlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { MossError } from "../errors.ts";

const LOCALS_EXPORT = "__moss_locals__";
const TSX_REGISTERED = Symbol.for("moss-ts.tsx-registered");
let loadCounter = 0;

/** The module's namespace plus its top-level values (exported or not), as loaded on the host. */
export interface LoadedModule {
  namespace: Record<string, unknown>;
  locals: Record<string, unknown>;
}

/**
 * Loads a context module on the host, once per call: writes its source (plus an export of the named top-level
 * values) to a sibling file so relative imports and node_modules resolve as they would for the module itself,
 * and imported files keep their identity (the `Ball` class the host binds is the one the module sees).
 */
export async function loadModule(
  modulePath: string,
  source: string,
  valueNames: string[],
): Promise<LoadedModule> {
  await ensureTypeScriptLoader();
  const directory = path.dirname(modulePath);
  const extension = path.extname(modulePath) || ".ts";
  const base = path.basename(modulePath, extension);
  const temporary = path.join(directory, `.${base}.moss-${process.pid}-${++loadCounter}${extension}`);
  const locals = `\nexport const ${LOCALS_EXPORT} = { ${valueNames.join(", ")} };\n`;
  try {
    await writeFile(temporary, source + locals, "utf8");
  } catch (error) {
    throw new MossError(
      "module-load",
      `${modulePath}: cannot load the context module: its folder must be writable for a moment (${(error as NodeJS.ErrnoException).code ?? error}: writing ${path.basename(temporary)} beside it, so its imports resolve as they would for the module itself)`,
      { file: modulePath },
      { cause: error },
    );
  }
  try {
    const namespace = (await import(/* @vite-ignore */ pathToFileURL(temporary).href)) as Record<
      string,
      unknown
    >;
    return { namespace, locals: (namespace[LOCALS_EXPORT] ?? {}) as Record<string, unknown> };
  } catch (error) {
    throw loadError(error, modulePath, source, temporary);
  } finally {
    await unlink(temporary).catch(() => {});
  }
}

function loadError(error: unknown, modulePath: string, source: string, temporary: string): MossError {
  const cause = error instanceof Error ? error : new Error(String(error));
  const stack = (cause.stack ?? "")
    .replaceAll(temporary, modulePath)
    .replaceAll(pathToFileURL(temporary).href, modulePath);
  const frame = stack.match(new RegExp(`${escapeRegExp(modulePath)}:(\\d+):(\\d+)`));
  const line = frame ? Number(frame[1]) : undefined;
  const column = frame ? Number(frame[2]) : undefined;
  const where = line ? `${modulePath}:${line}:${column}` : modulePath;
  const sourceLine = line ? `\n\n> ${line} | ${source.split("\n")[line - 1] ?? ""}` : "";
  return new MossError(
    "module-load",
    `${where} - loading the context module failed: ${cause.name}: ${cause.message}${sourceLine}`,
    { file: modulePath, line, column },
    { cause },
  );
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Outside vitest (which transforms TypeScript itself), registers tsx's ESM loader once per process. */
async function ensureTypeScriptLoader(): Promise<void> {
  const registry = globalThis as Record<symbol, unknown>;
  if (process.env.VITEST || registry[TSX_REGISTERED]) return;
  const { register } = await import("tsx/esm/api");
  register();
  registry[TSX_REGISTERED] = true;
}
