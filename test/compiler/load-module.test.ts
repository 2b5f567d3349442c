import { type FSWatcher, watch } from "node:fs";
import { chmod, mkdir, readdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { FIXTURES } from "../helpers/compile-from-text.ts";

const IS_ROOT = process.getuid?.() === 0;
const open: MossRuntime[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((runtime) => runtime.close()));
  for (const folder of folders.splice(0)) {
    await chmod(folder, 0o755).catch(() => {});
    await rm(folder, { recursive: true, force: true });
  }
});

/** A folder with a context module that imports a service class from a sibling file. */
async function moduleFolder(): Promise<{ folder: string; module: string; service: string }> {
  const folder = path.join(FIXTURES, ".tmp", `read-only-${process.pid}-${folders.length}-${Date.now()}`);
  await mkdir(folder, { recursive: true });
  folders.push(folder);
  const service = path.join(folder, "tool.ts");
  await writeFile(service, `export class Tool {\n  name(): string {\n    return "tool";\n  }\n}\n`);
  const module = path.join(folder, "context.ts");
  await writeFile(
    module,
    `import { Moss as Parent } from "moss-ts";\nimport { Tool } from "./tool.ts";\n\nconst secret = 41;\n\nexport class Moss extends Parent {\n  tool!: Tool;\n}\n\nexport function answer(): number {\n  return secret + 1;\n}\n`,
  );
  return { folder, module, service };
}

/** Records every entry created or removed in `folder` while `body` runs. */
async function watchFolder<T>(
  folder: string,
  body: () => Promise<T>,
): Promise<{ result: T; events: string[] }> {
  const events: string[] = [];
  const watcher: FSWatcher = watch(folder, (type, name) => events.push(`${type} ${name}`));
  try {
    const result = await body();
    await new Promise((resolve) => setTimeout(resolve, 50));
    return { result, events };
  } finally {
    watcher.close();
  }
}

describe("loading a context module writes nothing", () => {
  test("compile creates no file in the module's folder, and the module sees the host's class", async () => {
    const { folder, module, service } = await moduleFolder();
    const before = await readdir(folder);
    const { Tool } = (await import(/* @vite-ignore */ pathToFileURL(service).href)) as {
      Tool: new () => { name(): string };
    };
    const tool = new Tool();
    const { result: runtime, events } = await watchFolder(folder, async () => {
      const compiler = new MossCompiler({ sandbox: "in-process" }).bind(Tool, tool);
      return compiler.compile(module);
    });
    open.push(runtime);
    expect(events).toEqual([]);
    expect(await readdir(folder)).toEqual(before);
    expect(runtime.mossInjections().tool).toBe(tool);
    const execution = await runtime.execute({
      code: "function main(moss: Moss) { return answer() + moss.tool.name().length; }",
    });
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toBe(46);
  });

  test("each compile gets a fresh module instance", async () => {
    const { module } = await moduleFolder();
    await writeFile(
      module,
      `(globalThis as any).__freshLoads = ((globalThis as any).__freshLoads ?? 0) + 1;\nexport const x = 1;\n`,
    );
    (globalThis as Record<string, unknown>).__freshLoads = 0;
    open.push(await new MossCompiler({ sandbox: "in-process" }).compile(module));
    open.push(await new MossCompiler({ sandbox: "in-process" }).compile(module));
    expect((globalThis as Record<string, unknown>).__freshLoads).toBe(2);
  });

  test.skipIf(IS_ROOT)("a module in a read-only folder compiles (chmod has no effect for root)", async () => {
    const { folder, module } = await moduleFolder();
    await chmod(folder, 0o555);
    const runtime = await new MossCompiler({ sandbox: "in-process" })
      .injects({ tool: { name: () => "fake" } })
      .compile(module);
    open.push(runtime);
    expect(runtime.mossInjections().tool).toBeDefined();
  });
});
