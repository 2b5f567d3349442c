import { access, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { locatedMessage, MossError } from "../errors.ts";
import { esmPackageProblem } from "./esm-package.ts";
import { ensureModuleLoaders } from "./load-module.ts";
import type { MossCompiler } from "./moss-compiler.ts";

/** The sibling host setup file a module may have: `dir/name.ts` → `dir/name.host.ts` (absolute). */
export function hostSetupFile(modulePath: string): string {
  return `${path.resolve(modulePath).replace(/\.[cm]?tsx?$/, "")}.host.ts`;
}

/**
 * The host-setup convention, shared by the `moss` commands, `moss serve` and agents built from a module path: a
 * module `dir/name.ts` may have a sibling `dir/name.host.ts` exporting `setup(compiler)`, which binds the real
 * services before compile; `file` (a config's `modules.<name>.host`) names another setup file instead, which must
 * exist. Returns the file used, if any.
 */
export async function loadHostSetup(
  modulePath: string,
  compiler: MossCompiler,
  file?: string,
): Promise<string | undefined> {
  const candidate = file === undefined ? hostSetupFile(modulePath) : path.resolve(file);
  try {
    await access(candidate);
  } catch {
    if (file === undefined) return undefined;
    throw new MossError(
      "module-load",
      `${candidate}: the host setup file named for ${modulePath} does not exist`,
      {
        file: candidate,
      },
    );
  }
  let setup: unknown;
  try {
    await ensureModuleLoaders();
    setup = ((await import(pathToFileURL(candidate).href)) as { setup?: unknown }).setup;
  } catch (error) {
    const problem = await esmPackageProblem(candidate);
    throw await setupError("module-load", candidate, "loading the host setup failed", error, problem);
  }
  if (typeof setup !== "function") {
    throw new MossError(
      "hook-shape",
      `${candidate}: a host setup file must export function setup(compiler)`,
      { file: candidate },
    );
  }
  try {
    await setup(compiler);
  } catch (error) {
    if (MossError.is(error)) throw error;
    throw await setupError("hook-failed", candidate, "setup(compiler) failed", error);
  }
  return candidate;
}

/**
 * An error of the host setup file as a located MossError: `file:line:column - what: Error: message` and the code
 * frame, the line taken from the first stack frame in the file (or the `file:line:column` a load error names).
 */
async function setupError(
  code: "module-load" | "hook-failed",
  file: string,
  what: string,
  error: unknown,
  hint?: string,
): Promise<MossError> {
  const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const text = error instanceof Error ? `${error.message}\n${error.stack ?? ""}` : reason;
  const url = pathToFileURL(file).href;
  let location: { line: number; column: number } | undefined;
  for (const found of text.matchAll(/(file:\/\/[^\s():]+|\/[^\s():]+):(\d+):(\d+)/g)) {
    const named = found[1]!.startsWith("file:") ? fileURLToPath(found[1]!.split("?")[0]!) : found[1]!;
    if (named === file || found[1] === url) {
      location = { line: Number(found[2]), column: Number(found[3]) };
      break;
    }
  }
  // Where the file cannot load as an ES module, Node's own words ("Cannot require() ES Module … in a cycle") only
  // mislead: the hint says what to do.
  const message = `${what}: ${hint ?? reason}`;
  if (location === undefined) {
    return new MossError(code, `${file}: ${message}`, { file }, { cause: error });
  }
  const source = await readFile(file, "utf8").catch(() => undefined);
  return new MossError(
    code,
    locatedMessage(file, source, location.line, location.column, message),
    { file, ...location },
    { cause: error },
  );
}
