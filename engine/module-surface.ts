// What a context module's type-check sees of "moss-ts": the real declarations of the public API, TypeScript's
// declaration emit of the front door (engine/index.ts, package.json's "." export), never a hand-written copy that
// could drift. Installed, they are dist/'s own (`npm run build` emits them); from the sources they are emitted on
// first use with the project's TypeScript (tsconfig.surface.json) into the private temp folder, under the hash of
// the sources, so an edited source gets a new surface and a stale one is never read.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MossError } from "./errors.ts";
import { privateTempFolder, touchPrivateFile, writePrivateFile } from "./private-temp-folder.ts";

const FROM_SOURCES = import.meta.url.endsWith(".ts");
/** The repository (from the sources) or dist/ (installed): engine/ and container/ sit under it. */
const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
/** The project file of the surface's emit: tsconfig.build.json's options, the front door as its one root. */
const SURFACE_CONFIG = "tsconfig.surface.json";
/** The folders of the public API's declarations (the front door's imports reach no other). */
const DECLARATION_FOLDERS = ["engine", "container"];
/** The surface's list of its own files, written last: a surface without it (or missing a file) is made again. */
const MANIFEST = "files.json";

/** Where the surface's declarations are: dist/ installed, a folder of the private temp folder from the sources. */
const SURFACE_ROOT = FROM_SOURCES ? path.join(privateTempFolder(), `module-surface-${sourceHash()}`) : ROOT;

/** The file `import … from "moss-ts"` resolves to when moss-ts reads or checks a context module. */
export const MODULE_SURFACE_PATH = FROM_SOURCES
  ? path.join(SURFACE_ROOT, "engine", "index.d.ts")
  : fileURLToPath(new URL("./index.d.ts", import.meta.url));

const SURFACE_FOLDERS = DECLARATION_FOLDERS.map((folder) => path.join(SURFACE_ROOT, folder, path.sep));

let ensured = false;

/**
 * Makes sure the surface's declarations exist (emitting them from the sources when they do not) and returns
 * `MODULE_SURFACE_PATH`. Call it before a program that reads context modules is made; later calls cost nothing.
 */
export function ensureModuleSurface(): string {
  if (ensured) return MODULE_SURFACE_PATH;
  if (FROM_SOURCES && !usableSurface()) emitSurface();
  ensured = true;
  return MODULE_SURFACE_PATH;
}

/** Whether a file is one of the surface's declarations (shown to the model as "moss-ts", never by its path). */
export function isModuleSurfaceFile(fileName: string): boolean {
  const normalized = path.normalize(fileName);
  return SURFACE_FOLDERS.some((folder) => normalized.startsWith(folder));
}

/** The folders of the surface's declarations, for messages that must not show a host path. */
export function moduleSurfaceFolders(): readonly string[] {
  return SURFACE_FOLDERS;
}

/**
 * Whether an import made by a file of the surface is left unresolved: a package moss-ts's own declarations name
 * (ts-morph, openai, inversify, …). Loading them would make every context module's program parse megabytes of
 * `.d.ts` its code does not use; no public name needs them to be imported and used (a type they give is `any` in
 * a context module's check). moss-ts's own files, and Node's built-in modules (declared by `@types/node` where a
 * module loads Node's types), still resolve.
 */
export function isSurfacePackageImport(specifier: string, containingFile: string): boolean {
  if (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("node:")) return false;
  return isModuleSurfaceFile(containingFile);
}

/**
 * An emitted surface with every file its manifest lists. Only the manifest is marked used: a declaration file keeps
 * its modification time (`moss check` keeps no result of a check that read a file changed since it started), and a
 * surface whose files the temp folder's trimming removed is emitted again.
 */
function usableSurface(): boolean {
  let files: unknown;
  try {
    files = JSON.parse(readFileSync(path.join(SURFACE_ROOT, MANIFEST), "utf8"));
  } catch {
    return false;
  }
  if (!Array.isArray(files) || !files.includes("engine/index.d.ts")) return false;
  if (!files.every((file) => existsSync(path.join(SURFACE_ROOT, String(file))))) return false;
  touchPrivateFile(path.join(SURFACE_ROOT, MANIFEST));
  return true;
}

/** Emits the front door's declarations with the project's TypeScript into a new folder, then moves it in place. */
function emitSurface(): void {
  const partial = `${SURFACE_ROOT}.${process.pid}.partial`;
  rmSync(partial, { recursive: true, force: true });
  let tsc: string;
  try {
    const typescript = path.dirname(createRequire(import.meta.url).resolve("typescript/package.json"));
    tsc = path.join(typescript, "bin", "tsc");
  } catch (error) {
    throw surfaceError(
      `moss-ts runs from its sources but cannot find TypeScript (a devDependency) to emit the declarations a context module is checked against: ${(error as Error).message}`,
    );
  }
  const emitted = spawnSync(
    process.execPath,
    [tsc, "-p", path.join(ROOT, SURFACE_CONFIG), "--outDir", partial, "--pretty", "false"],
    { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 },
  );
  const files = declarationFiles(partial);
  // Type errors elsewhere in the sources being edited still give declarations; no index.d.ts is a failure.
  if (!files.includes("engine/index.d.ts")) {
    rmSync(partial, { recursive: true, force: true });
    const output = `${emitted.stdout ?? ""}${emitted.stderr ?? ""}`
      .trim()
      .split("\n")
      .slice(0, 20)
      .join("\n");
    throw surfaceError(
      `moss-ts could not emit the declarations of its front door (${SURFACE_CONFIG}) that context modules are checked against${emitted.error ? `: ${emitted.error.message}` : ""}\n${output}`,
    );
  }
  writePrivateFile(path.join(partial, MANIFEST), JSON.stringify(files));
  // What is left of a trimmed surface goes first.
  if (existsSync(SURFACE_ROOT) && !usableSurface()) rmSync(SURFACE_ROOT, { recursive: true, force: true });
  try {
    renameSync(partial, SURFACE_ROOT);
  } catch {
    // Another process put the same surface (same sources) in place first.
    rmSync(partial, { recursive: true, force: true });
    if (!usableSurface()) throw surfaceError(`moss-ts could not put its surface in place at ${SURFACE_ROOT}`);
  }
}

function declarationFiles(folder: string): string[] {
  if (!existsSync(folder)) return [];
  return readdirSync(folder, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".d.ts"))
    .map((entry) => path.relative(folder, path.join(entry.parentPath, entry.name)).split(path.sep).join("/"))
    .sort();
}

function surfaceError(message: string): MossError {
  return new MossError("module-import", message, { surface: SURFACE_ROOT });
}

/**
 * The hash of everything the surface is emitted from: the TypeScript and declaration files of engine/ and container/,
 * the project files and TypeScript's version.
 */
function sourceHash(): string {
  const hash = createHash("sha256");
  for (const name of ["tsconfig.json", "tsconfig.build.json", SURFACE_CONFIG]) {
    hash.update(`${name}\0${readFileSync(path.join(ROOT, name), "utf8")}\0`);
  }
  try {
    const require = createRequire(import.meta.url);
    hash.update(readFileSync(require.resolve("typescript/package.json")));
  } catch {}
  for (const folder of DECLARATION_FOLDERS) {
    const entries = readdirSync(path.join(ROOT, folder), { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile() && /\.[cm]?ts$/.test(entry.name))
      .map((entry) => path.join(entry.parentPath, entry.name))
      .sort();
    for (const file of entries) hash.update(`${path.relative(ROOT, file)}\0`).update(readFileSync(file));
  }
  return hash.digest("hex").slice(0, 24);
}
