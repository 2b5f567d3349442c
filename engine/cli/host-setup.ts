import { access } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { ensureModuleLoaders } from "../compiler/load-module.ts";
import type { MossCompiler } from "../compiler/moss-compiler.ts";
import { MossError } from "../errors.ts";

/**
 * The host-setup convention of the CLI: a module `dir/name.ts` may have a sibling `dir/name.host.ts` exporting
 * `setup(compiler)`, which binds the real services before compile. Returns the file used, if any.
 */
export async function loadHostSetup(modulePath: string, compiler: MossCompiler): Promise<string | undefined> {
  const absolute = path.resolve(modulePath);
  const candidate = `${absolute.replace(/\.[cm]?tsx?$/, "")}.host.ts`;
  try {
    await access(candidate);
  } catch {
    return undefined;
  }
  let setup: unknown;
  try {
    await ensureModuleLoaders();
    setup = ((await import(pathToFileURL(candidate).href)) as { setup?: unknown }).setup;
  } catch (error) {
    const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    throw new MossError(
      "module-load",
      `${candidate}: loading the host setup failed: ${reason}`,
      { file: candidate },
      { cause: error },
    );
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
    const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    throw new MossError(
      "hook-failed",
      `${candidate}: setup(compiler) failed: ${reason}`,
      { file: candidate },
      { cause: error },
    );
  }
  return candidate;
}
