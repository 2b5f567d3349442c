import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { moduleProject } from "../../engine/module/module-project.ts";

/** Writes a generated file atomically, only when its text differs (an unchanged API keeps file and timestamp). */
export async function writeIfChanged(file: string, text: string): Promise<boolean> {
  const previous = await readFile(file, "utf8").catch(() => undefined);
  if (previous === text) return false;
  await mkdir(path.dirname(file), { recursive: true });
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, text, "utf8");
  await rename(temporary, file);
  refreshCompilerView(file);
  return true;
}

/**
 * Makes the compiler's shared ts-morph projects re-read `file` on the next compile. They refresh the files they
 * were given, but not the files they reached through imports (engine/compiler/module-project.ts), so a generated
 * declaration rewritten in the same process would otherwise keep its old text. Remove once the engine refreshes
 * imported files itself.
 */
export function refreshCompilerView(file: string): void {
  for (const source of ["", 'import "node:fs";']) {
    moduleProject(source).getSourceFile(path.resolve(file))?.refreshFromFileSystemSync();
  }
}
