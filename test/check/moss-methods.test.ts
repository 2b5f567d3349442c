import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MOSS_DIAGNOSTIC_CODES } from "../../engine/check/index.ts";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";

/*
 * Model code reaches only `moss`'s data fields and services (DESIGN.md: "`moss` inside the isolate is a real
 * isolate-side object: its data fields are plain values … its service fields are proxies"). Methods and accessors of a
 * module's `Moss` class are host code that never reaches the isolate, so the one rule (visibility.ts
 * `isReachableMossMember`) makes the prompt, the checker and the sandbox agree: the prompt leaves them out, the strict
 * type-check refuses a use with diagnostic 90010, the sandbox has no such member, and the compile warns the author.
 */

const CONTEXT_FILE = path.resolve("test/fixtures/modules/moss-methods.ts");
const DISPLAY_PATH = path.relative(process.cwd(), CONTEXT_FILE);
const main = (body: string): string => `async function main(moss: Moss) {\n  ${body}\n}`;

let runtime: MossRuntime;
let warnings: readonly string[];
const emitted: string[] = [];
const onWarning = (warning: Error & { code?: string }): void => {
  if (warning.code === "MOSS_UNREACHABLE_MEMBER") emitted.push(warning.message);
};

beforeAll(async () => {
  process.on("warning", onWarning);
  runtime = await new MossCompiler({ sandbox: "in-process", typeCheck: "strict" }).compile(DISPLAY_PATH);
  warnings = runtime.compileWarnings();
  // process.emitWarning reports on the next tick.
  await new Promise((resolve) => setImmediate(resolve));
});
afterAll(async () => {
  process.off("warning", onWarning);
  await runtime?.close();
  await closeSharedSandboxes();
});

describe("the prompt leaves the Moss class's methods and accessors out", () => {
  test("fields stay, methods, accessors and their comments go, no blank lines are left behind", async () => {
    const source = await runtime.prompter().sourceCode();
    expect(source).toContain("count = 1;");
    expect(source).toContain('name = "moss";');
    expect(source).toContain("/** A data field: model code reads and writes it. */");
    for (const gone of ["hello", "Says hello", "double", "Doubles the count", "label", "The count as text"]) {
      expect(source).not.toContain(gone);
    }
    // A private method is shown as before (the model sees it is private); the field that shares its line stays.
    expect(source).toContain("private secret(): number { return 7; } visibleAfterSecret = true;");
    expect(source).toContain("static make(): Moss {");
    expect(source).not.toContain("hiddenHelper");
    expect(source).not.toMatch(/\n\s*\n\s*\n/);
    // The whole source is still there for a module's own prompt hook.
    expect(await runtime.prompter().sourceCode({ excludeHidden: false })).toContain("hello(): string {");
    expect(await runtime.prompter().dumpModulePrompt()).not.toContain("hello");
  });
});

describe("the compile warns the author, once per member, with its place", () => {
  test("compileWarnings and process warnings name file:line:col and what to do", () => {
    const expected = [
      ["hello", 10, 3, "method"],
      ["double", 15, 9, "method"],
      ["label", 21, 7, "accessor"],
    ] as const;
    const mine = warnings.filter((warning) => warning.includes("of Moss"));
    expect(mine).toHaveLength(expected.length);
    for (const [index, [name, line, column, kind]] of expected.entries()) {
      expect(mine[index]).toContain(
        `${DISPLAY_PATH}:${line}:${column} - ${name} is a${kind === "method" ? " method" : "n accessor"} of Moss`,
      );
      expect(mine[index]).toContain("move it into a bound service");
    }
    expect(emitted).toEqual(mine);
  });
});

const REFUSED = [
  { label: "a method call", code: main("return moss.hello();"), name: "hello", kind: "method" },
  { label: "an async method", code: main("return await moss.double();"), name: "double", kind: "method" },
  { label: "a getter", code: main("return moss.label.length;"), name: "label", kind: "accessor" },
  {
    label: "a setter",
    code: main('moss.label = "#4";\n  return moss.count;'),
    name: "label",
    kind: "accessor",
  },
  {
    label: "a method by a literal key",
    code: main('return moss["hello"]();'),
    name: "hello",
    kind: "method",
  },
  {
    label: "a method through destructuring",
    code: main("const { hello } = moss;\n  return hello.call(moss);"),
    name: "hello",
    kind: "method",
  },
] as const;

describe("the checker refuses a use exactly when the sandbox lacks the member", () => {
  test.each(REFUSED)("$label", async ({ code, name, kind }) => {
    const checked = await runtime.execute({ code });
    expect(checked.ok).toBe(false);
    expect(checked.error?.kind).toBe("type");
    const diagnostics = checked.error?.diagnostics ?? [];
    expect(diagnostics, JSON.stringify(diagnostics)).toHaveLength(1);
    const [diagnostic] = diagnostics;
    expect(diagnostic!.code).toBe(MOSS_DIAGNOSTIC_CODES.unreachableMember);
    expect(diagnostic!.message).toContain(
      `'${name}' is a${kind === "method" ? " method" : "n accessor"} of Moss`,
    );
    expect(diagnostic!.line).toBe(2);
    // Reality: unchecked, the sandbox's moss has no such member (a setter merely adds a data-less own property, so
    // its observable effect, the count, does not change).
    const unchecked = await runtime.execute({ code, typeCheck: "off" });
    if (code.includes("moss.label =")) {
      expect(unchecked.ok).toBe(true);
      expect(unchecked.returns).toBe(1);
    } else {
      expect(unchecked.ok).toBe(false);
      expect(unchecked.error?.kind).toBe("runtime");
      expect(unchecked.error?.name).toBe("TypeError");
    }
  });

  test("TypeScript's 'Did you mean' names no method or accessor of Moss; a field's suggestion stays", async () => {
    const typo = await runtime.typecheck(main("return moss.helo();"));
    expect(typo, JSON.stringify(typo)).toHaveLength(1);
    expect(typo[0]!.code).toBe(2339);
    expect(typo[0]!.message).toBe("Property 'helo' does not exist on type 'Moss'.");
    const accessor = await runtime.typecheck(main("return moss.labels;"));
    expect(accessor.map((diagnostic) => diagnostic.message)).toEqual([
      "Property 'labels' does not exist on type 'Moss'.",
    ]);
    const field = await runtime.typecheck(main("return moss.cont;"));
    expect(field.map((diagnostic) => [diagnostic.code, diagnostic.message])).toEqual([
      [2551, "Property 'cont' does not exist on type 'Moss'. Did you mean 'count'?"],
    ]);
  });

  test("data fields, moss-ts's own members and the snippet's own methods are fine", async () => {
    const code = main(
      "moss.count += 1;\n  moss.pprint(moss.name);\n  const own = { hello: () => 5 };\n  return moss.count + own.hello() + (moss.visibleAfterSecret ? 1 : 0);",
    );
    const execution = await runtime.execute({ code });
    expect(execution.error, JSON.stringify(execution.error)).toBeUndefined();
    expect(execution.returns).toBe(8);
  });
});

describe("the process driver's moss agrees", () => {
  test("no method or accessor of the class, its fields as declared", async () => {
    const processRuntime = await new MossCompiler({ sandbox: "process", typeCheck: "off" }).compile(
      DISPLAY_PATH,
    );
    try {
      const call = await processRuntime.execute({ code: main("return moss.hello();") });
      expect(call.error?.kind).toBe("runtime");
      expect(call.error?.name).toBe("TypeError");
      const seen = await processRuntime.execute({
        code: main("return [moss.count, typeof moss.label, typeof moss.double, 'hello' in moss];"),
      });
      expect(seen.error, JSON.stringify(seen.error)).toBeUndefined();
      expect(seen.returns).toEqual([1, "undefined", "undefined", false]);
    } finally {
      await processRuntime.close();
    }
  });
});
