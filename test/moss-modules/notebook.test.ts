import { afterEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";

const open: MossRuntime[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((runtime) => runtime.close()));
});

async function compile(
  configure: (compiler: MossCompiler) => void = () => {},
  context?: Parameters<MossCompiler["joinContext"]>[0],
) {
  const compiler = new MossCompiler({ sandbox: "in-process" });
  configure(compiler);
  if (context) compiler.joinContext(context);
  const runtime = await compiler.compile("moss-modules/notebook.ts");
  open.push(runtime);
  return runtime;
}

describe("moss-modules/notebook", () => {
  test("its prompt shows the notebook and the clock, never the hidden default clock", async () => {
    const prompt = await (await compile()).prompter().dumpModulePrompt();
    expect(prompt).toContain("moss.notes.push({ text, tags, at: moss.clock.now() })");
    expect(prompt).toContain("function findNotes(notes: Note[], ...tags: string[]): Note[]");
    expect(prompt).not.toContain("__moss_compile__");
  });

  test("notes written with an injected clock persist into the next session and can be found by tag", async () => {
    const fixed = new Date("2026-01-02T03:04:05Z");
    const first = await compile((compiler) => void compiler.bind("Clock", { now: () => fixed }));
    const written = await first.execute({
      code: `async function main(moss: Moss) {
  moss.notes.push({ text: "buy milk", tags: ["shopping"], at: moss.clock.now() });
  moss.notes.push({ text: "call Ada", tags: ["people", "todo"], at: moss.clock.now() });
  moss.facts["user.name"] = "Ada";
}`,
    });
    expect(written.error).toBeUndefined();
    const second = await compile(() => {}, JSON.parse(JSON.stringify(written.context)));
    const found = await second.execute({
      code: `function main(moss: Moss) { return [findNotes(moss.notes, "TODO").map((note) => note.text), moss.notes[0]!.at, moss.facts]; }`,
    });
    expect(found.error).toBeUndefined();
    expect(found.returns).toEqual([["call Ada"], fixed, { "user.name": "Ada" }]);
  });

  test("without a host clock the module binds the system clock", async () => {
    const runtime = await compile();
    const execution = await runtime.execute({
      code: `function main(moss: Moss) { return moss.clock.now() instanceof Date; }`,
    });
    expect(execution.returns).toBe(true);
  });
});
