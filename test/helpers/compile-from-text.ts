import { mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MossCompiler, type MossCompilerOptions } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";

export const FIXTURES = fileURLToPath(new URL("../fixtures/", import.meta.url));
const TEMPORARY = path.join(FIXTURES, ".tmp");
let counter = 0;

/** Writes `source` as a module in test/fixtures/.tmp (so `../modules/x.ts` imports resolve) and returns its path. */
export async function writeModule(source: string, name = "context"): Promise<string> {
  await mkdir(TEMPORARY, { recursive: true });
  const file = path.join(TEMPORARY, `${name}-${process.pid}-${++counter}.ts`);
  await writeFile(file, source, "utf8");
  return file;
}

/** Compiles a context module given as text, like ts-morph's getInfoFromText; `configure` sets up the compiler. */
export async function compileFromText(
  source: string,
  configure: (compiler: MossCompiler) => void = () => {},
  options: MossCompilerOptions = {},
): Promise<MossRuntime> {
  const file = await writeModule(source);
  const compiler = new MossCompiler({ sandbox: "in-process", ...options });
  configure(compiler);
  try {
    return await compiler.compile(file);
  } finally {
    await rm(file, { force: true });
  }
}
