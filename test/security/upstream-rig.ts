import { mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { ExecutionLimits } from "../../engine/types.ts";

/** The hostile MCP server of the upstream and credential attacks (`node <file> <mode>`). */
export const HOSTILE_MCP_SERVER = fileURLToPath(
  new URL("../fixtures/security/hostile-mcp-server.mjs", import.meta.url),
);

/** Limits of the attack runs: a short wall clock, so a run that waits on an upstream ends soon. */
export const UPSTREAM_LIMITS: Partial<ExecutionLimits> = { wallTimeMs: 3_000, cpuTimeMs: 2_000 };

/** A scratch folder inside the repository (context modules there import "moss-ts"). */
export async function scratchFolder(name: string): Promise<{ folder: string; remove(): Promise<void> }> {
  const folder = fileURLToPath(
    new URL(`../fixtures/.tmp/${name}-${process.pid}-${Date.now()}/`, import.meta.url),
  );
  await mkdir(folder, { recursive: true });
  return { folder, remove: () => rm(folder, { recursive: true, force: true }) };
}

/**
 * Compiles a context module whose `Moss` has one field per `[field, type, typesFile]` after `bind` bound the services;
 * the module imports each type from its generated declaration file.
 */
export async function compileServices(
  folder: string,
  driver: "process" | "in-process",
  fields: ReadonlyArray<[field: string, type: string, typesFile: string]>,
  bind: (compiler: MossCompiler) => Promise<unknown>,
): Promise<MossRuntime> {
  const compiler = new MossCompiler({ sandbox: driver, limits: UPSTREAM_LIMITS });
  await bind(compiler);
  const imports = fields.map(
    ([, type, file]) => `import type { ${type} } from "./${path.basename(file).replace(/\.ts$/, ".ts")}";`,
  );
  const members = fields.map(([field, type]) => `  ${field}!: ${type};`);
  const source = [
    'import { Moss as Parent } from "moss-ts";',
    ...imports,
    "",
    "export class Moss extends Parent {",
    ...members,
    "}",
    "",
  ].join("\n");
  const file = path.join(folder, `context-${driver}-${fields.map(([field]) => field).join("-")}.ts`);
  await writeFile(file, source);
  return compiler.compile(file);
}

/** Waits until `condition` holds (an event the test expects, not a duration it measures). */
export async function eventually(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`never happened: ${what}`);
}
