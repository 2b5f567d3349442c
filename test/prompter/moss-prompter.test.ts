import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { MossError } from "../../engine/errors.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { compileFromText, FIXTURES } from "../helpers/compile-from-text.ts";

const GOLDEN = path.resolve("test/golden");
const open: MossRuntime[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((runtime) => runtime.close()));
});

async function compile(modulePath: string): Promise<MossRuntime> {
  const runtime = await new MossCompiler({ sandbox: "in-process" }).compile(modulePath);
  open.push(runtime);
  return runtime;
}

/** Compares with a golden file; `UPDATE_GOLDEN=1 npm test` rewrites it (review the diff). */
async function expectGolden(name: string, actual: string): Promise<void> {
  const file = path.join(GOLDEN, name);
  if (process.env.UPDATE_GOLDEN) await writeFile(file, actual, "utf8");
  expect(actual).toBe(await readFile(file, "utf8"));
}

describe("MossPrompter: golden prompts", () => {
  test("the sphero example", async () => {
    const runtime = await compile("examples/sphero/context.ts");
    await expectGolden("sphero.prompt.md", await runtime.prompter().dumpModulePrompt());
  });

  test("every reflection kind", async () => {
    const runtime = await compile(path.join(FIXTURES, "modules/reflection.ts"));
    await expectGolden("reflection.prompt.md", await runtime.prompter().dumpModulePrompt());
  });
});

describe("MossPrompter: reflection rules", () => {
  async function entries(modulePath = path.join(FIXTURES, "modules/reflection.ts")) {
    const runtime = await compile(modulePath);
    return new Map(await runtime.prompter().reflectModuleAttrs());
  }

  test("imported names used by visible code appear in import order; unused imports do not", async () => {
    const runtime = await compile(path.join(FIXTURES, "modules/reflection.ts"));
    const names = (await runtime.prompter().reflectModuleAttrs()).map(([name]) => name);
    const direct = names.slice(0, names.indexOf("UNIT_SQUARE") + 1);
    expect(direct).toEqual([
      "Parent",
      "Telemetry",
      "Canvas",
      "Colour",
      "distance",
      "MAX_WIDTH",
      "Measured",
      "scale",
      "stencil",
      "Turtle",
      "UNIT_SQUARE",
    ]);
    expect(names).not.toContain("unused");
  });

  test("functions show signature and JSDoc, no body; overloads show only their signatures", async () => {
    const map = await entries();
    expect(map.get("distance")).toBe(
      "/** Computes the distance between two points. */\nfunction distance(a: Point, b: Point): number;",
    );
    expect(map.get("scale")).toContain("function scale(value: number, factor: number): number;");
    expect(map.get("scale")).toContain("function scale(value: Point, factor: number): Point;");
    expect(map.get("scale")).not.toContain("number | Point");
    expect(map.get("scale")).not.toContain("typeof value");
  });

  test("classes in declaration form: no bodies, no private/protected/#/_ members, initializers become types", async () => {
    const canvas = (await entries()).get("Canvas")!;
    expect(canvas).toContain("abstract class Canvas {");
    expect(canvas).toContain("readonly width: number;");
    expect(canvas).toContain("abstract draw(outline: Outline, colour: Colour): number;");
    expect(canvas).toContain("bounds(): { min: Point; max: Point };");
    expect(canvas).toContain("/** Clears the canvas. */");
    for (const hidden of [
      "secret",
      "cache",
      "#reallyPrivate",
      "_internal",
      "this.width",
      "return {",
      "export",
    ]) {
      expect(canvas).not.toContain(hidden);
    }
  });

  test("__class_prompt__ and __prompt__ are used verbatim", async () => {
    const map = await entries();
    expect(map.get("Turtle")).toBe("class Turtle { /** Moves forward. */ forward(steps: number): void }");
    expect(map.get("stencil")).toBe(
      "declare const stencil: { trace(outline: Outline): Outline } // traces outlines",
    );
  });

  test("consts as declare const with JSDoc; interfaces and enums as declarations", async () => {
    const map = await entries();
    expect(map.get("UNIT_SQUARE")).toBe("/** The unit square. */\ndeclare const UNIT_SQUARE: Outline;");
    expect(map.get("MAX_WIDTH")).toBe(
      "/** The largest supported canvas width. */\ndeclare const MAX_WIDTH: 4096;",
    );
    expect(map.get("Measured")).toContain("interface Measured {");
    expect(map.get("Measured")).toContain("/** Area in square units. */");
    expect(map.get("Colour")).toContain('enum Colour {\n  Red = "red",');
  });

  test("types referenced but not imported are reflected transitively, once", async () => {
    const runtime = await compile(path.join(FIXTURES, "modules/reflection.ts"));
    const names = (await runtime.prompter().reflectModuleAttrs()).map(([name]) => name);
    expect(names).toContain("Point");
    expect(names).toContain("Outline");
    expect(names).toContain("Sample");
    expect(names.filter((name) => name === "Point")).toHaveLength(1);
  });

  test("node_modules imports reflect from their .d.ts, labelled with the package", async () => {
    const runtime = await compile(path.join(FIXTURES, "modules/reflection.ts"));
    const entry = (await runtime.prompter().attributeEntries()).find(
      (candidate) => candidate.name === "Telemetry",
    )!;
    expect(entry.module).toBe("fake-telemetry");
    expect(entry.prompt).toContain("record(name: string, value: number): void;");
    expect(entry.prompt).not.toContain("buffer");
    const sample = (await runtime.prompter().attributeEntries()).find(
      (candidate) => candidate.name === "Sample",
    )!;
    expect(sample.module).toBe("fake-telemetry");
  });

  test("entries are delimited: one line per run of a module, a label where the text does not declare the name", async () => {
    const runtime = await compile(path.join(FIXTURES, "modules/reflection.ts"));
    const text = await runtime.prompter().dumpAttrsPrompt();
    expect(text.startsWith('// from "moss-ts"\n// Parent:\n')).toBe(true);
    expect(text.match(/\/\/ from "\.\/shapes\.ts"/g)).toHaveLength(2);
    expect(text).toContain('\n\n// from "fake-telemetry"\n/** Records measurements. */\nclass Telemetry {');
    expect(text).toContain(
      "\n\n/** Computes the distance between two points. */\nfunction distance(a: Point, b: Point): number;",
    );
    expect(text).not.toContain("// distance:");
    const notes = await compileFromText(
      `export const x = 1;\nexport function __moss_attr_prompts__() { return [["units", "All lengths are in metres."]]; }`,
    );
    open.push(notes);
    expect(await notes.prompter().dumpAttrsPrompt()).toBe("// units:\nAll lengths are in metres.");
  });

  test("hidden names appear nowhere in the prompt", async () => {
    const source = `import { Moss as Parent } from "moss-ts";
import { distance } from "../modules/shapes.ts";
export const shown = 1;
// <moss-hide>
import { Canvas } from "../modules/shapes.ts";
export function secretHelper(): number { return distance({ x: 0, y: 0 }, { x: 1, y: 1 }); }
export class Moss extends Parent { canvasSecret?: Canvas; }
// </moss-hide>`;
    const runtime = await compileFromText(source);
    open.push(runtime);
    const prompt = await runtime.prompter().dumpModulePrompt();
    for (const hidden of ["secretHelper", "Canvas", "canvasSecret", "moss-hide"])
      expect(prompt).not.toContain(hidden);
    expect(prompt).toContain("export const shown = 1;");
    expect(prompt).not.toContain('name="distance"');
  });

  test("__moss_attr_prompts__: overrides first, '' hides, null has no opinion, unknown names add notes", async () => {
    const source = `import { distance, scale, UNIT_SQUARE } from "../modules/shapes.ts";
export const a = distance; export const b = scale; export const c = UNIT_SQUARE;
// <moss-hide>
export function __moss_attr_prompts__() {
  return [["note", "Remember: units are metres."], ["scale", ""], ["UNIT_SQUARE", "const UNIT_SQUARE: the unit square"], ["distance", null]];
}
// </moss-hide>`;
    const runtime = await compileFromText(source);
    open.push(runtime);
    const attrs = await runtime.prompter().reflectModuleAttrs();
    expect(attrs.slice(0, 2)).toEqual([
      ["note", "Remember: units are metres."],
      ["UNIT_SQUARE", "const UNIT_SQUARE: the unit square"],
    ]);
    expect(attrs.map(([name]) => name)).not.toContain("scale");
    expect(attrs.map(([name]) => name)).toContain("distance");
    expect(attrs.filter(([name]) => name === "UNIT_SQUARE")).toHaveLength(1);
  });

  test("__moss_module_prompt__ replaces the default prompt and can use the prompter", async () => {
    const source = `import type { MossPrompter } from "moss-ts";
export const x = 1;
// <moss-hide>
export async function __moss_module_prompt__(prompter: MossPrompter) {
  return "CUSTOM\\n" + (await prompter.sourceCode());
}
// </moss-hide>`;
    const runtime = await compileFromText(source);
    open.push(runtime);
    expect(await runtime.prompter().dumpModulePrompt()).toBe(
      'CUSTOM\nimport type { MossPrompter } from "moss-ts";\nexport const x = 1;',
    );
  });

  test("a hook returning the wrong shape is a hook-shape MossError naming the hook", async () => {
    const runtime = await compileFromText(
      `export const x = 1;\nexport function __moss_attr_prompts__() { return 42; }`,
    );
    open.push(runtime);
    const error = await runtime
      .prompter()
      .dumpModulePrompt()
      .catch((caught: unknown) => caught);
    expect(MossError.is(error, "hook-shape")).toBe(true);
    expect((error as Error).message).toContain("__moss_attr_prompts__");
    expect((error as Error).message).toMatch(/:2:\d+/);
  });

  test("sourceCode: visible by default, the whole file on request", async () => {
    const source = `export const a = 1;\n// <moss-hide>\nexport const b = 2;\n// </moss-hide>`;
    const runtime = await compileFromText(source);
    open.push(runtime);
    expect(await runtime.prompter().sourceCode()).toBe("export const a = 1;");
    expect(await runtime.prompter().sourceCode({ excludeHidden: false })).toBe(source);
  });

  test("the prompt is byte-for-byte the same in another process", async () => {
    const runtime = await compile("examples/sphero/context.ts");
    const here = await runtime.prompter().dumpModulePrompt();
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--no-node-snapshot", "bin/moss.js", "prompt", "examples/sphero/context.ts"],
      {
        env: { ...process.env, VITEST: "", NO_COLOR: "1" },
      },
    );
    expect(stdout).toBe(here);
  });
});
