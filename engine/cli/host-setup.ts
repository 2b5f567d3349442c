import { access } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
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
  const setup = ((await import(pathToFileURL(candidate).href)) as { setup?: unknown }).setup;
  if (typeof setup !== "function") {
    throw new MossError(
      "hook-shape",
      `${candidate}: a host setup file must export function setup(compiler)`,
      { file: candidate },
    );
  }
  await setup(compiler);
  return candidate;
}
