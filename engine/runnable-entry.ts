import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { BuildOptions, Plugin } from "esbuild";
import { withEsbuild } from "./esbuild-service.ts";
import { privateTempFolder, touchPrivateFile, writePrivateFile } from "./private-temp-folder.ts";

/** Options of `runnableEntry`. */
export interface RunnableEntryOptions {
  /** Packages left out of the bundle and imported from the host's own copy (native or large ones). */
  external?: string[];
  /**
   * `entry`: every file of the bundle sees the entry file's `import.meta.url` (for code that resolves packages or
   * files relative to itself and lives in the entry's folder). Default: the bundle file's own URL.
   */
  importMetaUrl?: "entry";
}

const require = createRequire(import.meta.url);
const entries = new Map<string, string>();

/**
 * An entry file that plain Node can start (a child process or a worker thread) whether moss-ts runs from built
 * JavaScript or from its TypeScript sources. Built JavaScript is returned as it is. A TypeScript entry and its
 * imports are bundled once per process with esbuild (the `external` packages pinned to the host's copies) into a
 * content-addressed file in a temp folder only this user can write (`privateTempFolder`): no TypeScript loader is needed in the new process or thread.
 * Synchronous: code in the bundle sees the bundle's own `import.meta.url` (use `runnableEntryAsync` if it matters).
 */
export function runnableEntry(entryUrl: string | URL, options: RunnableEntryOptions = {}): string {
  const entryFile = entryPath(entryUrl);
  if (!entryFile.endsWith(".ts")) return entryFile;
  const cached = bundled(entryFile);
  if (cached) return cached;
  // esbuild is loaded on first use: a process that only runs built JavaScript (or a CLI's --help) never loads it.
  const output = withEsbuild((esbuild) => esbuild.buildSync(buildOptions(entryFile, options)))
    .outputFiles![0]!.text;
  return remember(entryFile, writeEntry(entryFile, pinExternals(output, options)));
}

/**
 * `runnableEntry` without blocking the caller's thread while esbuild bundles; each bundled file keeps its own
 * `import.meta.url` (its source file's URL), so paths it computes from it still point at moss-ts's files.
 */
export async function runnableEntryAsync(
  entryUrl: string | URL,
  options: RunnableEntryOptions = {},
): Promise<string> {
  const entryFile = entryPath(entryUrl);
  if (!entryFile.endsWith(".ts")) return entryFile;
  const cached = bundled(entryFile);
  if (cached) return cached;
  const result = await withEsbuild((esbuild) =>
    esbuild.build({ ...buildOptions(entryFile, options), plugins: [sourceImportMetaUrl] }),
  );
  return remember(entryFile, writeEntry(entryFile, pinExternals(result.outputFiles![0]!.text, options)));
}

function entryPath(entryUrl: string | URL): string {
  return typeof entryUrl === "string" && !entryUrl.startsWith("file:") ? entryUrl : fileURLToPath(entryUrl);
}

function buildOptions(entryFile: string, options: RunnableEntryOptions): BuildOptions & { write: false } {
  return {
    entryPoints: [entryFile],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    write: false,
    external: options.external ?? [],
    ...(options.importMetaUrl === "entry"
      ? { define: { "import.meta.url": JSON.stringify(pathToFileURL(entryFile).href) } }
      : {}),
    logLevel: "silent",
  };
}

/** Imports of the external packages point at the host's installed copies, wherever the bundle file lives. */
function pinExternals(output: string, options: RunnableEntryOptions): string {
  let text = output;
  for (const name of options.external ?? []) {
    // A wildcard names packages loaded by a computed name at run time: nothing to pin.
    if (name.includes("*") || !text.includes(`from "${name}"`)) continue;
    const url = pathToFileURL(require.resolve(name)).href;
    text = text.replaceAll(`from "${name}"`, `from ${JSON.stringify(url)}`);
  }
  return text;
}

function writeEntry(entryFile: string, output: string): string {
  const stem = path.basename(entryFile).replace(/\.ts$/, "");
  const hash = createHash("sha256").update(output).digest("hex").slice(0, 16);
  const file = path.join(privateTempFolder(), `${stem}-${hash}.mjs`);
  if (existsSync(file)) touchPrivateFile(file);
  else writePrivateFile(file, output);
  return file;
}

/**
 * The bundle this process wrote for an entry, if it is still there (marked used): the private temp folder is trimmed
 * (`trimPrivateTempFolder`), so a long-running process bundles again rather than start a file that is gone.
 */
function bundled(entryFile: string): string | undefined {
  const file = entries.get(entryFile);
  if (file === undefined || !existsSync(file)) return undefined;
  touchPrivateFile(file);
  return file;
}

function remember(entryFile: string, file: string): string {
  entries.set(entryFile, file);
  return file;
}

/** Replaces `import.meta.url` in moss-ts's own sources by the URL of the source file it is written in. */
const sourceImportMetaUrl: Plugin = {
  name: "source-import-meta-url",
  setup(builder) {
    builder.onLoad({ filter: /\.ts$/ }, (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const source = readFileSync(args.path, "utf8");
      if (!source.includes("import.meta.url")) return undefined;
      const url = JSON.stringify(pathToFileURL(args.path).href);
      return { contents: source.replaceAll("import.meta.url", url), loader: "ts" };
    });
  },
};
