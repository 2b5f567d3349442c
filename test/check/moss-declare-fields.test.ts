import path from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { decodeProperties } from "../../engine/context/index.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";

/*
 * A `declare` field of a module's `Moss` class (`declare note: string`) is a field like `note!: string`: TypeScript
 * emits no initializer for it, and MOSS is what sets it (DESIGN.md: field kinds are "decided statically from the
 * declared type"; a data field "starts from its initializer, then the value restored from the MossContext, then
 * injects()"). The prompt shows it and the checker accepts it, so the sandbox's `moss` must hold it too: one rule,
 * visibility.ts `isReachableMossMember`, decides for prompt, checker and run time alike.
 */

const CONTEXT_FILE = path.resolve("test/fixtures/modules/moss-declare-fields.ts");
const DISPLAY_PATH = path.relative(process.cwd(), CONTEXT_FILE);
const main = (body: string): string => `async function main(moss: Moss) {\n  ${body}\n}`;
const CLOCK = { now: () => 42 };

const runtimes: MossRuntime[] = [];
async function compile(
  sandbox: "in-process" | "process",
  configure: (compiler: MossCompiler) => void = () => {},
): Promise<MossRuntime> {
  const compiler = new MossCompiler({ sandbox, typeCheck: "strict" }).bind("Clock", CLOCK);
  configure(compiler);
  const runtime = await compiler.compile(DISPLAY_PATH);
  runtimes.push(runtime);
  return runtime;
}
afterAll(async () => {
  for (const runtime of runtimes) await runtime.close();
  await closeSharedSandboxes();
});

describe.each(["in-process", "process"] as const)("a declare field on the %s driver", (sandbox) => {
  test("the prompt shows it, the compile does not warn, the checker and the sandbox agree", async () => {
    const runtime = await compile(sandbox);
    const source = await runtime.prompter().sourceCode();
    expect(source).toContain("declare note: string | undefined;");
    expect(source).toContain("declare clock: Clock;");
    expect(runtime.compileWarnings()).toEqual([]);
    const execution = await runtime.execute({
      code: main(
        'moss.note = "remember";\n  moss.tags = ["a"];\n  return [moss.clock.now(), moss.count, Object.keys(moss).includes("note")];',
      ),
    });
    expect(execution.error, JSON.stringify(execution.error)).toBeUndefined();
    expect(execution.returns).toEqual([42, 1, true]);
    // Data fields are persisted like any other.
    expect(decodeProperties(execution.context.properties)).toMatchObject({ note: "remember", tags: ["a"] });
    const next = await runtime.execute({ code: main("return [moss.note, moss.tags];") });
    expect(next.returns).toEqual(["remember", ["a"]]);
  });
});

describe("a declare data field takes the context and injects() like any data field", () => {
  test("a saved value is restored, injects() wins over it", async () => {
    const first = await compile("in-process");
    const saved = (await first.execute({ code: main('moss.note = "saved";') })).context;
    const restored = await compile("in-process", (compiler) => void compiler.joinContext(saved));
    expect((await restored.execute({ code: main("return moss.note;") })).returns).toBe("saved");
    const injected = await compile("in-process", (compiler) => {
      compiler.joinContext(saved).injects({ note: "injected" });
    });
    expect((await injected.execute({ code: main("return moss.note;") })).returns).toBe("injected");
  });

  test("a declare service without a binding fails the compile, naming the field and the token", async () => {
    const compiler = new MossCompiler({ sandbox: "in-process" });
    await expect(compiler.compile(DISPLAY_PATH)).rejects.toThrow(/clock[\s\S]*Clock/);
  });
});
