import { rm, writeFile } from "node:fs/promises";
import { afterEach, describe, expect, test } from "vitest";
import { ModuleCache } from "../../engine/compiler/module-cache.ts";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { writeModule } from "../helpers/compile-from-text.ts";
import { rejection } from "../helpers/rejection.ts";

// The module counts its own evaluations in a global: a module loaded once per cache evaluates once.
const SOURCE = `import { Moss as Parent } from "moss-ts";

/** Says who is greeted. */
export interface Greeter { greet(name: string): string }

const loads = ((globalThis as Record<string, unknown>).__mossCacheLoads as number | undefined) ?? 0;
(globalThis as Record<string, unknown>).__mossCacheLoads = loads + 1;

export class Moss extends Parent {
  greeter!: Greeter;
  count = 0;
}
`;

const open: MossRuntime[] = [];
const written: string[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((runtime) => runtime.close()));
  await Promise.all(written.splice(0).map((file) => rm(file, { force: true })));
  delete (globalThis as Record<string, unknown>).__mossCacheLoads;
});

const loads = () => (globalThis as Record<string, unknown>).__mossCacheLoads;

async function compile(file: string, cache: ModuleCache | undefined, greeting: string): Promise<MossRuntime> {
  const compiler = new MossCompiler({ sandbox: "in-process", ...(cache ? { moduleCache: cache } : {}) });
  compiler.bind("Greeter", { greet: (name: string) => `${greeting}, ${name}` });
  const runtime = await compiler.compile(file);
  open.push(runtime);
  return runtime;
}

describe("ModuleCache: a module compiled once, sessions of their own", () => {
  test("runtimes of one cache share the loaded module and its prompt, not their services or data", async () => {
    const file = await writeModule(SOURCE);
    written.push(file);
    const cache = new ModuleCache();
    const first = await compile(file, cache, "Hello");
    const second = await compile(file, cache, "Bonjour");
    expect(loads()).toBe(1);
    expect(cache.size).toBe(1);
    expect(await second.prompter().dumpModulePrompt()).toBe(await first.prompter().dumpModulePrompt());

    const code = `async function main(moss: Moss) { moss.count += 5; return moss.greeter.greet("Ada"); }`;
    const a = await first.execute({ code });
    expect(a.ok).toBe(true);
    expect(a.returns).toBe("Hello, Ada");
    const b = await second.execute({
      code: `async function main(moss: Moss) { return [moss.count, moss.greeter.greet("Ada")]; }`,
    });
    expect(b.ok).toBe(true);
    expect(b.returns).toEqual([0, "Bonjour, Ada"]);
  });

  test("without a cache every compile loads its own instance (the default is unchanged)", async () => {
    const file = await writeModule(SOURCE);
    written.push(file);
    await compile(file, undefined, "Hello");
    await compile(file, undefined, "Hello");
    expect(loads()).toBe(2);
  });

  test("an edited file is another module; a failed compile is not kept, so the fixed file compiles", async () => {
    const file = await writeModule(SOURCE);
    written.push(file);
    const cache = new ModuleCache();
    await compile(file, cache, "Hello");
    await writeFile(file, SOURCE.replace("count = 0;", 'count: number = "zero";'), "utf8");
    const error = await rejection(compile(file, cache, "Hello"));
    expect(error).toMatchObject({ code: "module-type-error" });
    expect(cache.size).toBe(1);
    await writeFile(file, SOURCE.replace("count = 0;", "count = 1;"), "utf8");
    const fixed = await compile(file, cache, "Hello");
    expect(loads()).toBe(2);
    expect(cache.size).toBe(2);
    const execution = await fixed.execute({ code: "async function main(moss: Moss) { return moss.count; }" });
    expect(execution.returns).toBe(1);
  });

  test("holds at most maxModules sources, least recently used dropped first", async () => {
    const cache = new ModuleCache({ maxModules: 2 });
    const files = await Promise.all([1, 2, 3].map(() => writeModule(SOURCE)));
    written.push(...files);
    await compile(files[0]!, cache, "Hello");
    await compile(files[1]!, cache, "Hello");
    await compile(files[0]!, cache, "Hello");
    await compile(files[2]!, cache, "Hello");
    expect(cache.size).toBe(2);
    expect(loads()).toBe(3);
    await compile(files[0]!, cache, "Hello");
    expect(loads()).toBe(3);
    await compile(files[1]!, cache, "Hello");
    expect(loads()).toBe(4);
  });
});
