import { rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { compileFromText, writeModule } from "../helpers/compile-from-text.ts";
import { rejection } from "../helpers/rejection.ts";

const open: MossRuntime[] = [];
const written: string[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((runtime) => runtime.close()));
  await Promise.all(written.splice(0).map((file) => rm(file, { force: true })));
});

async function compileModule(source: string, configure: (compiler: MossCompiler) => void = () => {}) {
  const file = await writeModule(source);
  written.push(file);
  const compiler = new MossCompiler({ sandbox: "in-process" });
  configure(compiler);
  const runtime = await compiler.compile(file);
  open.push(runtime);
  return { file, runtime };
}

describe("compile() type-checks the context module", () => {
  test("a wrong initializer fails with module-type-error in tsc form: file:line:col - error TS…, then a code frame", async () => {
    const file = await writeModule(
      [
        'import { Moss as Parent } from "moss-ts";',
        "export class Moss extends Parent {",
        '  turns: number = "zero";',
        "}",
      ].join("\n"),
    );
    written.push(file);
    const error = await rejection(new MossCompiler({ sandbox: "in-process" }).compile(file));
    expect(error.code).toBe("module-type-error");
    expect(error.message).toContain(
      `${file}:3:3 - error TS2322: Type 'string' is not assignable to type 'number'.`,
    );
    expect(error.message).toContain('> 3 |   turns: number = "zero";');
    expect(error.message).toContain("the context module does not type-check (1 error)");
    expect(error.details).toMatchObject({
      file,
      line: 3,
      column: 3,
      errors: [{ file, line: 3, column: 3, code: 2322 }],
    });
  });

  test("a misspelt import type (which made the field any) is an error naming the import", async () => {
    const source = [
      'import { Moss as Parent } from "moss-ts";',
      'import type { Pointt } from "../modules/shapes.ts";',
      "export class Moss extends Parent {",
      "  origin?: Pointt;",
      "}",
    ].join("\n");
    const error = await rejection(compileFromText(source));
    expect(error.code).toBe("module-type-error");
    expect(error.message).toMatch(
      /:2:15 - error TS2724: '"\.\.\/modules\/shapes\.ts"' has no exported member named 'Pointt'\. Did you mean 'Point'\?/,
    );
    // Spelt right, the same module compiles.
    const { runtime } = await compileModule(source.replaceAll("Pointt", "Point"));
    expect(runtime.modulePath).toContain("context-");
  });

  test("a missing type is an error, and the module's host code never ran", async () => {
    const marker = `__moss_type_check_${process.pid}`;
    const source = [
      'import { Moss as Parent } from "moss-ts";',
      `(globalThis as Record<string, unknown>)[${JSON.stringify(marker)}] = true;`,
      "export class Moss extends Parent {",
      "  ledger: Ledger = [];",
      "}",
    ].join("\n");
    const error = await rejection(compileFromText(source));
    expect(error.message).toMatch(/:4:11 - error TS2304: Cannot find name 'Ledger'\./);
    expect((globalThis as Record<string, unknown>)[marker]).toBeUndefined();
  });

  test("errors in a file the module imports name that file and its line", async () => {
    const helper = await writeModule(
      ["export function twice(value: number): number {", "  return String(value) + String(value);", "}"].join(
        "\n",
      ),
      "helper",
    );
    written.push(helper);
    const error = await rejection(
      compileFromText(
        [
          'import { Moss as Parent } from "moss-ts";',
          `import { twice } from "./${path.basename(helper)}";`,
          "export class Moss extends Parent { n = twice(2) }",
        ].join("\n"),
      ),
    );
    expect(error.code).toBe("module-type-error");
    const shown = path.relative(process.cwd(), helper);
    expect(error.message).toContain(
      `${shown}:2:3 - error TS2322: Type 'string' is not assignable to type 'number'.`,
    );
    expect(error.message).toContain("> 2 |   return String(value) + String(value);");
  });

  test("hidden-region code is checked too: its error goes to the author, and the prompt never shows that code", async () => {
    const visible = [
      'import { Moss as Parent } from "moss-ts";',
      "export class Moss extends Parent { n = 1 }",
    ];
    const hidden = ["// <moss-hide>", "export const secretLimit: number = 42;", "// </moss-hide>"];
    const { runtime } = await compileModule([...visible, ...hidden].join("\n"));
    expect(await runtime.prompter().dumpModulePrompt()).not.toContain("secretLimit");

    const broken = [...visible, ...hidden].join("\n").replace("= 42", '= "42"');
    const error = await rejection(compileFromText(broken));
    expect(error.code).toBe("module-type-error");
    expect(error.message).toContain(
      ":4:14 - error TS2322: Type 'string' is not assignable to type 'number'.",
    );
    expect(error.message).toContain('> 4 | export const secretLimit: number = "42";');
  });

  test("a session's code (MossContext.code) is checked like the file", async () => {
    const source = 'import { Moss as Parent } from "moss-ts";\nexport class Moss extends Parent { n = 1 }\n';
    const { runtime } = await compileModule(source);
    const context = { ...runtime.dumpContext(), code: source.replace("n = 1", "n: string = 1") };
    const error = await rejection(compileFromText(source, (compiler) => compiler.joinContext(context)));
    expect(error.code).toBe("module-type-error");
    expect(error.message).toMatch(/:2:36 - error TS2322: Type 'number' is not assignable to type 'string'\./);
  });

  test("Node's globals in module code check against Node's types without importing a builtin", async () => {
    const { runtime } = await compileModule(
      [
        'import { Moss as Parent } from "moss-ts";',
        "const home: string | undefined = process.env.HOME;",
        "const here: string = new URL(import.meta.url).pathname;",
        "export class Moss extends Parent { started = Buffer.byteLength(here + (home ?? '')) > 0 }",
        'export function log(): void { console.log("host"); setTimeout(() => {}, 1); }',
      ].join("\n"),
    );
    expect(runtime.hostMoss().started).toBe(true);
    // A real error beside them is still one.
    const error = await rejection(
      compileFromText(
        'import { Moss as Parent } from "moss-ts";\nexport const port: number = process.env.PORT;\n',
      ),
    );
    expect(error.message).toMatch(
      /:2:14 - error TS2322: Type 'string \| undefined' is not assignable to type 'number'/,
    );
  });

  test("many errors: ten are shown, the rest counted", async () => {
    const lines = Array.from({ length: 12 }, (_, index) => `export const v${index}: number = "${index}";`);
    const error = await rejection(
      compileFromText(['import { Moss as Parent } from "moss-ts";', ...lines].join("\n")),
    );
    expect(error.message.match(/ - error TS2322/g)).toHaveLength(10);
    expect(error.message).toContain("… and 2 more type errors");
    expect(error.message).toContain("(12 errors)");
    expect(error.details.errors).toHaveLength(12);
  });
});

describe("a file found clean is not checked again until it or what it imports changes", () => {
  test("an imported file edited on disk after a clean compile is checked again", async () => {
    const helper = await writeModule(
      "export function twice(value: number): number {\n  return value * 2;\n}\n",
      "helper",
    );
    written.push(helper);
    const source = [
      'import { Moss as Parent } from "moss-ts";',
      `import { twice } from "./${path.basename(helper)}";`,
      "export class Moss extends Parent { n = twice(2) }",
    ].join("\n");
    const { file } = await compileModule(source);
    await compileModule(source);
    await writeFile(
      helper,
      "export function twice(value: number): number {\n  return String(value);\n}\n",
      "utf8",
    );
    const error = await rejection(new MossCompiler({ sandbox: "in-process" }).compile(file));
    expect(error.code).toBe("module-type-error");
    expect(error.message).toContain(
      `${path.relative(process.cwd(), helper)}:2:3 - error TS2322: Type 'string' is not assignable to type 'number'.`,
    );
  });
});

describe("the module's own files are the author's: others are not checked here", () => {
  test("a package's broken .d.ts or moss-ts itself never fails a module's compile", async () => {
    const declaration = (await writeModule("", "broken")).replace(/\.ts$/, ".d.ts");
    written.push(declaration.replace(/\.d\.ts$/, ".ts"), declaration);
    await rm(declaration.replace(/\.d\.ts$/, ".ts"));
    await writeFile(declaration, "export declare const x: Missing;\n", "utf8");
    const { runtime } = await compileModule(
      [
        'import { Moss as Parent } from "moss-ts";',
        `import type { x } from "./${path.basename(declaration).replace(/\.d\.ts$/, ".js")}";`,
        "export class Moss extends Parent { n = 1 }",
        "export type X = typeof x;",
      ].join("\n"),
    );
    expect(runtime.hostMoss().n).toBe(1);
  });
});
