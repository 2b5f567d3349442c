import path from "node:path";
import { Project } from "ts-morph";
import { afterAll, describe, expect, test } from "vitest";
import { isInputError } from "../../engine/cli/exit-codes.ts";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { decodeProperties } from "../../engine/context/index.ts";
import { MOSS_OWN_MEMBERS } from "../../engine/membrane/index.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { compileFromText } from "../helpers/compile-from-text.ts";
import { rejection } from "../helpers/rejection.ts";

/*
 * moss-ts's own members of `moss` (`pprint`, `ask`, `show`: visibility.ts MOSS_OWN_MEMBERS) are moss-ts's whatever a
 * module declares: the sandbox sets them. A module's `Moss` that re-declares one the way moss-ts's `Moss` does
 * (`declare pprint: …`) still has moss-ts's member, not a data field: no warning at any run, nothing persisted. Any
 * other member of such a name would make the prompt and the type-check promise what the run does not do (a data field
 * `show` is shadowed by moss-ts's, a service `ask` shadows moss-ts's), so the compile refuses it with a located error.
 */

const CONTEXT_FILE = path.resolve("test/fixtures/modules/moss-own-members.ts");
const DISPLAY_PATH = path.relative(process.cwd(), CONTEXT_FILE);
const main = (body: string): string => `async function main(moss: Moss) {\n  ${body}\n}`;

const runtimes: MossRuntime[] = [];
afterAll(async () => {
  for (const runtime of runtimes) await runtime.close();
  await closeSharedSandboxes();
});

test("MOSS_OWN_MEMBERS names exactly the members moss-ts's Moss declares", () => {
  const project = new Project({ skipAddingFilesFromTsConfig: true });
  const mossClass = project.addSourceFileAtPath("engine/moss.ts").getClassOrThrow("Moss");
  expect(mossClass.getMembers().map((member) => member.getSymbolOrThrow().getName())).toEqual([
    ...MOSS_OWN_MEMBERS,
  ]);
});

describe.each(["in-process", "process"] as const)("a re-declared own member on the %s driver", (sandbox) => {
  test("is moss-ts's member: it works, no run warns, nothing is persisted, injects() refuses it", async () => {
    const runtime = await new MossCompiler({ sandbox, typeCheck: "strict" }).compile(DISPLAY_PATH);
    runtimes.push(runtime);
    expect(runtime.compileWarnings()).toEqual([]);
    expect(await runtime.prompter().sourceCode()).toContain(
      "declare pprint: (...values: unknown[]) => void;",
    );
    for (let turn = 0; turn < 2; turn++) {
      const execution = await runtime.execute({
        code: main(
          'moss.pprint("hello", moss.count);\n  moss.show({ mediaType: "image/png", data: "aGk=" });\n  return [typeof moss.ask, Object.keys(moss)];',
        ),
      });
      expect(execution.error, JSON.stringify(execution.error)).toBeUndefined();
      expect(execution.warnings).toEqual([]);
      expect(execution.stdout).toContain("hello 1");
      expect(execution.images).toEqual([{ mediaType: "image/png", data: "aGk=" }]);
      // The own members are not data fields: model code's keys of moss and the saved context hold only `count`.
      expect(execution.returns).toEqual(["function", ["count"]]);
      expect(decodeProperties(execution.context.properties)).toEqual({ count: 1 });
    }
    const asked = await runtime.execute({
      code: main('return await moss.ask("Which colour?", { choices: ["red", "blue"] });'),
    });
    expect(asked.error, JSON.stringify(asked.error)).toBeUndefined();
    expect(asked.pending?.requests).toEqual([
      expect.objectContaining({ kind: "clarification", question: "Which colour?", choices: ["red", "blue"] }),
    ]);
    expect(asked.warnings).toEqual([]);
  });
});

test("injects() refuses an own member: it is not a field of the module's Moss", async () => {
  const compiler = new MossCompiler({ sandbox: "in-process" }).injects({ pprint: () => {} });
  const error = await rejection(compiler.compile(DISPLAY_PATH));
  expect(error.message).toContain('injects(): "pprint" is not a field of Moss');
});

/** Compiles a module whose Moss class has `members`, extending moss-ts's Moss unless `extendsBase` is false. */
function compileMoss(members: string[], extendsBase = true) {
  const source = [
    'import { Moss as Base } from "moss-ts";',
    "/** A service: an interface with a method. */",
    "export interface Asker {\n  ask(question: string): Promise<string>;\n}",
    `export class Moss${extendsBase ? " extends Base" : ""} {`,
    ...members.map((member) => `  ${member}`),
    "}",
  ].join("\n");
  return rejection(compileFromText(source, (compiler) => void compiler.bind("Asker", {})));
}

describe("any other member named like an own member fails the compile, located, saying why", () => {
  const cases = [
    {
      label: "a data field (it would be shadowed)",
      members: ["count = 1;", "show: string[] = [];"],
      extendsBase: false,
      line: 8,
      column: 3,
      name: "show",
      why: "this data field would be shadowed by moss-ts's moss.show in the sandbox",
    },
    {
      label: "a data field holding a function of the member's type",
      members: ["pprint = (...values: unknown[]): void => {};"],
      extendsBase: true,
      line: 7,
      column: 3,
      name: "pprint",
      why: "this data field would be shadowed by moss-ts's moss.pprint",
    },
    {
      label: "a service field (it would shadow moss-ts's member)",
      members: ["ask!: Asker;"],
      extendsBase: false,
      line: 7,
      column: 3,
      name: "ask",
      why: "this service field would shadow moss-ts's moss.ask in the sandbox",
    },
    {
      label: "a declare field of another type",
      members: ["declare show: string;"],
      extendsBase: false,
      line: 7,
      column: 11,
      name: "show",
      why: "since Moss does not extend moss-ts's Moss",
    },
    {
      label:
        "a declare field of a type moss-ts's member does not satisfy, in a Moss that extends moss-ts's Moss",
      members: ["declare ask: (question: string) => Promise<number>;"],
      extendsBase: true,
      line: 7,
      column: 11,
      name: "ask",
      why: "this declare field's type is not one moss-ts's ask satisfies",
    },
    {
      label: "a method",
      members: ["count = 1;", "show(): string {\n    return 'x';\n  }"],
      extendsBase: false,
      line: 8,
      column: 3,
      name: "show",
      why: "this method would take its place in the prompt and the type-check",
    },
  ];
  test.each(cases)("$label", async ({ members, extendsBase, line, column, name, why }) => {
    const error = await compileMoss(members, extendsBase);
    expect(error.code).toBe("moss-member-reserved");
    // The CLI's exit code says the input (the module) could not be used.
    expect(isInputError(error)).toBe(true);
    expect(error.details).toMatchObject({ member: name, line, column });
    expect(error.message).toMatch(
      new RegExp(`^[^\\n]*:${line}:${column} - ${name} is moss-ts's own member of moss`),
    );
    expect(error.message).toContain(why);
    expect(error.message).toContain(`rename it`);
  });

  test("a static member of such a name is the class's, not moss's: it compiles", async () => {
    const runtime = await compileFromText(
      [
        'import { Moss as Base } from "moss-ts";',
        "export class Moss extends Base {",
        "  static show = 1;",
        "}",
      ].join("\n"),
    );
    runtimes.push(runtime);
    expect(runtime.compileWarnings()).toEqual([]);
  });
});
