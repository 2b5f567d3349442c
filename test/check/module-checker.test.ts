import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { InMemoryFileSystemHost, Project } from "ts-morph";
import { beforeAll, describe, expect, it } from "vitest";
import { CHECK_COMPILER_OPTIONS, MOSS_DIAGNOSTIC_CODES, ModuleChecker } from "../../engine/check/index.ts";
import { MossError } from "../../engine/errors.ts";
import { FLAWED_SNIPPETS, SPHERO_HIDDEN_NAMES, VALID_SNIPPETS } from "../fixtures/check/corpus.ts";

const FIXTURES = fileURLToPath(new URL("../fixtures/check/", import.meta.url));
const SPHERO_PATH = path.join(FIXTURES, "sphero.ts");
const SPHERO_SOURCE = readFileSync(SPHERO_PATH, "utf8");

function spheroChecker(project?: Project): ModuleChecker {
  return new ModuleChecker({
    modulePath: SPHERO_PATH,
    source: SPHERO_SOURCE,
    hiddenNames: SPHERO_HIDDEN_NAMES,
    project,
  });
}

let checker: ModuleChecker;
beforeAll(() => {
  checker = spheroChecker();
});

describe("flawed snippets", () => {
  it("has a corpus of at least 25 flawed snippets", () => {
    expect(FLAWED_SNIPPETS.length).toBeGreaterThanOrEqual(25);
  });

  it.each(FLAWED_SNIPPETS)("$name → $expectCode at line $expectLine", (snippet) => {
    const diagnostics = checker.check(snippet.code);
    const match = diagnostics.find(
      (diagnostic) => diagnostic.code === snippet.expectCode && diagnostic.line === snippet.expectLine,
    );
    expect(match, JSON.stringify(diagnostics, null, 2)).toBeDefined();
    if (!match) return;
    expect(match.severity).toBe(snippet.expectSeverity ?? "error");
    if (snippet.expectColumn !== undefined) expect(match.column).toBe(snippet.expectColumn);
    if (snippet.expectMessage !== undefined) expect(match.message).toContain(snippet.expectMessage);
    const line = snippet.code.split("\n")[match.line - 1] ?? "";
    expect(match.frame).toContain(line);
    expect(match.frame).toContain(`${" ".repeat(match.column - 1)}^`);
  });
});

describe("valid snippets", () => {
  it.each(VALID_SNIPPETS)("$name has no diagnostics", (snippet) => {
    expect(checker.check(snippet.code)).toEqual([]);
  });
});

describe("scope", () => {
  it("the import message names the visible names and no hidden one", () => {
    const [diagnostic] = checker.check('import { helper } from "./sphero.ts";\nfunction main(moss: Moss) {}');
    expect(diagnostic?.code).toBe(MOSS_DIAGNOSTIC_CODES.importStatement);
    for (const name of ["Moss", "Ball", "LedMatrix", "square", "play", "MAX_SPEED"]) {
      expect(diagnostic?.message).toContain(name);
    }
    for (const name of SPHERO_HIDDEN_NAMES) expect(diagnostic?.message).not.toContain(name);
  });

  it("a hidden name gets the moss message and no bare 'Cannot find name'", () => {
    const diagnostics = checker.check("function main(moss: Moss) {\n  return helper(1);\n}");
    expect(diagnostics).toEqual([
      {
        code: 90001,
        message: "'helper' is not available to your code (it is hidden by the context module).",
        line: 2,
        column: 10,
        severity: "error",
        frame: "> 2 |   return helper(1);\n    |          ^",
      },
    ]);
  });

  it("a syntax error is reported alone, without semantic noise", () => {
    const diagnostics = checker.check(
      "async function main(moss: Moss) {\n  await moss.body.rol(90, 100, 2;\n}",
    );
    expect(diagnostics.map((diagnostic) => diagnostic.code)).toEqual([1005]);
  });

  it("maps columns after the inserted `: Moss` annotation back to the snippet", () => {
    const code = "async function main(moss) { await moss.body.spn(1, 2); moss.count = 'x'; }";
    const diagnostics = checker.check(code);
    expect(diagnostics.map((diagnostic) => [diagnostic.code, diagnostic.column])).toEqual([
      [2551, code.indexOf("spn") + 1],
      [2322, code.indexOf("moss.count") + 1],
    ]);
  });

  it("reports an unclosed brace with the line of the opening one", () => {
    const [diagnostic] = checker.check("async function main(moss: Moss) {\n  moss.body.stop();\n");
    expect(diagnostic?.code).toBe(1005);
    expect(diagnostic?.message).toContain("'}' expected");
    expect(diagnostic?.message).toContain("(line 1)");
  });

  it("uses the moss-ts base Moss when the module declares none", () => {
    const modulePath = path.join(FIXTURES, "plain.ts");
    const plain = new ModuleChecker({
      modulePath,
      source: 'export function greet(name: string): string {\n  return "hi " + name;\n}\n',
      hiddenNames: [],
    });
    expect(plain.check('function main(moss: Moss) {\n  moss.pprint(greet("x"));\n}')).toEqual([]);
    const [diagnostic] = plain.check("function main(moss: Moss) {\n  moss.body.stop();\n}");
    expect(diagnostic?.code).toBe(2339);
  });
});

describe("TypeScript's lib (ES2023, served to the program as one file)", () => {
  it("has every ES2023 declaration, with TypeScript's own overloads, and nothing of ES2024", () => {
    const valid =
      "function main(moss: Moss) {\n" +
      "  const last = [1, 2].findLast((value) => value > 1)?.toFixed();\n" +
      '  const sorted = [3, 1].toSorted().at(-1)?.toFixed() + "a".replaceAll("a", "b");\n' +
      '  const own = Object.hasOwn({}, "a") && new Error("x", { cause: 1 }).message.length > 0;\n' +
      "  const pairs = new Map([[1, 'a']]).get(1)?.toUpperCase();\n" +
      "  return [last, sorted, own, pairs, Symbol.asyncIterator];\n" +
      "}";
    expect(checker.check(valid)).toEqual([]);
    const newer =
      "const groups = Object.groupBy([1], (value: number) => value);\nconst all = Promise.withResolvers<number>();";
    expect(
      checker.check(newer).map((diagnostic) => [diagnostic.code, diagnostic.line, diagnostic.message]),
    ).toEqual([
      [2550, 1, "Property 'groupBy' does not exist on type 'ObjectConstructor'."],
      [2550, 2, "Property 'withResolvers' does not exist on type 'PromiseConstructor'."],
    ]);
    // Promise.all's overloads are merged from several lib files: the tuple overload must win, as in TypeScript.
    const overloads = "const all: Promise<number> = Promise.all([1, 'a']);";
    expect(checker.check(overloads).map((diagnostic) => diagnostic.message)).toEqual([
      "Type 'Promise<[number, string]>' is not assignable to type 'Promise<number>'.\n  Type '[number, string]' is not assignable to type 'number'.",
    ]);
  });
});

describe("previous definitions", () => {
  it("a definition from an accepted snippet is visible to later checks, and later ones win", () => {
    const session = spheroChecker();
    const uses = "async function main(moss: Moss) {\n  await zigzag(moss, 3);\n}";
    expect(session.check(uses).map((diagnostic) => diagnostic.code)).toEqual([2304]);
    session.accept(
      "async function zigzag(moss: Moss, times: number): Promise<void> {\n  for (let i = 0; i < times; i++) await moss.body.roll(i % 2 ? 45 : 315, 80, 1);\n}\nasync function main(moss: Moss) {\n  await zigzag(moss, 1);\n}",
    );
    expect(session.check(uses)).toEqual([]);
    session.accept("function zigzag(label: string): string {\n  return label;\n}");
    const [diagnostic] = session.check(uses);
    expect(diagnostic?.code).toBe(2554);
    expect(session.check('function main(moss: Moss) {\n  moss.pprint(zigzag("z"));\n}')).toEqual([]);
  });

  it("an accepted main does not clash with the next main, and can be called by name", () => {
    const session = spheroChecker();
    session.accept("async function main(moss) {\n  await moss.body.spin(90, 1);\n}");
    expect(session.check("async function main(moss: Moss) {\n  moss.body.stop();\n}")).toEqual([]);
    expect(session.check("async function again(moss: Moss) {\n  await main(moss);\n}")).toEqual([]);
  });

  it("accepted variables, types and exported declarations persist", () => {
    const session = spheroChecker();
    session.accept("export const SLOW = 40;\ntype Path = Move[];\nconst route: Path = square(2);");
    expect(
      session.check(
        "async function main(moss: Moss) {\n  const path: Path = route;\n  await play(moss.body.roll, path.map((move) => ({ ...move, speed: SLOW })));\n}",
      ),
    ).toEqual([]);
  });
});

describe("a check does not depend on the checks before it", () => {
  // A checker reused across snippets prints `"zeta" | "alpha"` here once an earlier snippet made "zeta" first:
  // TypeScript orders a union's members by when their types were created.
  const earlier =
    'function main(moss: Moss) {\n  const last: "zeta" = "zeta";\n  const first: "alpha" = "alpha";\n  return [last, first];\n}';
  const probe =
    'function main(moss: Moss) {\n  const choice: "alpha" | "zeta" = "omega";\n  return choice;\n}';

  it("a snippet's diagnostics are the same in a new checker and after other snippets", () => {
    const fresh = spheroChecker().check(probe);
    expect(fresh.map((diagnostic) => diagnostic.message)).toEqual([
      `Type '"omega"' is not assignable to type '"alpha" | "zeta"'.`,
    ]);
    const used = spheroChecker();
    used.check(earlier);
    expect(used.check(probe)).toEqual(fresh);
    expect(used.check(probe)).toEqual(fresh);
  });

  it("every flawed snippet of the corpus gets the same diagnostics whatever was checked before", () => {
    const codes = [...FLAWED_SNIPPETS, ...VALID_SNIPPETS].map((snippet) => snippet.code);
    const alone = codes.map((code) => spheroChecker().check(code));
    const forward = spheroChecker();
    const backward = spheroChecker();
    const forwardResults = codes.map((code) => forward.check(code));
    const backwardResults = [...codes].reverse().map((code) => backward.check(code));
    expect(forwardResults).toEqual(alone);
    expect(backwardResults.reverse()).toEqual(alone);
  });
});

describe("updateSource", () => {
  it("later checks see the module's new source", () => {
    const session = spheroChecker();
    const dance = "async function main(moss: Moss) {\n  await dance(moss.body);\n}";
    expect(session.check(dance).map((diagnostic) => diagnostic.code)).toEqual([2304]);
    session.updateSource(
      `${SPHERO_SOURCE}\n/** Dances. */\nexport async function dance(ball: Ball): Promise<void> {\n  await ball.spin(720, 2);\n}\n`,
    );
    expect(session.check(dance)).toEqual([]);
    session.updateSource(SPHERO_SOURCE.replace("count = 0;", 'count = "zero";'));
    expect(session.check('function main(moss: Moss) {\n  moss.count = "one";\n}')).toEqual([]);
    expect(
      session.check("function main(moss: Moss) {\n  moss.count = 1;\n}").map((diagnostic) => diagnostic.code),
    ).toEqual([2322]);
  });

  it("previous definitions survive a source update", () => {
    const session = spheroChecker();
    session.accept("function twice(value: number): number {\n  return value * 2;\n}");
    session.updateSource(`${SPHERO_SOURCE}\nexport const EXTRA = 1;\n`);
    expect(session.check("function main(moss: Moss) {\n  return twice(EXTRA);\n}")).toEqual([]);
  });
});

describe("construction", () => {
  it("rejects a relative module path with a MossError", () => {
    let caught: unknown;
    try {
      new ModuleChecker({ modulePath: "sphero.ts", source: "", hiddenNames: [] });
    } catch (error) {
      caught = error;
    }
    expect(MossError.is(caught, "invalid-argument")).toBe(true);
    expect((caught as Error).message).toContain("sphero.ts");
  });

  it("uses a given project's compiler options and file system, without adding files to it", () => {
    const project = new Project({
      useInMemoryFileSystem: true,
      compilerOptions: { ...CHECK_COMPILER_OPTIONS, noImplicitAny: false, types: [] },
    });
    const fileSystem = project.getFileSystem();
    fileSystem.writeFileSync(
      "/memory/ball.ts",
      "export interface Ball {\n  roll(speed: number): Promise<void>;\n}\n",
    );
    const source = 'import type { Ball } from "./ball.ts";\nexport class Moss {\n  body!: Ball;\n}\n';
    fileSystem.writeFileSync("/memory/robot.ts", source);
    const memory = new ModuleChecker({ modulePath: "/memory/robot.ts", source, hiddenNames: [], project });
    const untypedHelper =
      "function twice(value) {\n  return value * 2;\n}\nasync function main(moss: Moss) {\n  await moss.body.roll(twice(2));\n}";
    expect(memory.check(untypedHelper)).toEqual([]);
    expect(
      memory.check('async function main(moss: Moss) {\n  await moss.body.roll("fast");\n}')[0]?.code,
    ).toBe(2345);
    expect(project.getSourceFiles()).toEqual([]);
    expect(checker.check(untypedHelper).map((diagnostic) => diagnostic.code)).toContain(7006);
  });

  it("reuses the parsed files of a given real-file-system project", () => {
    const project = new Project({
      compilerOptions: CHECK_COMPILER_OPTIONS,
      skipAddingFilesFromTsConfig: true,
    });
    project.addSourceFileAtPath(SPHERO_PATH);
    project.resolveSourceFileDependencies();
    expect(project.getProgram().compilerObject.getSourceFile(path.join(FIXTURES, "bolt.ts"))).toBeDefined();
    const shared = spheroChecker(project);
    expect(shared.check("async function main(moss: Moss) {\n  await moss.body.spn(1, 2);\n}")[0]?.code).toBe(
      2551,
    );
    expect(shared.check(VALID_SNIPPETS[0]!.code)).toEqual([]);
  });

  it("a new checker sees an imported file that changed on disk", () => {
    const directory = mkdtempSync(path.join(os.tmpdir(), "moss-check-"));
    try {
      const source = 'import type { Ball } from "./ball.ts";\nexport class Moss {\n  body!: Ball;\n}\n';
      const modulePath = path.join(directory, "robot.ts");
      writeFileSync(modulePath, source);
      const snippet = 'async function main(moss: Moss) {\n  await moss.body.roll("fast");\n}';
      writeFileSync(
        path.join(directory, "ball.ts"),
        "export interface Ball {\n  roll(speed: number): Promise<void>;\n}\n",
      );
      const before = new ModuleChecker({ modulePath, source, hiddenNames: [] });
      expect(before.check(snippet).map((diagnostic) => diagnostic.code)).toEqual([2345]);
      writeFileSync(
        path.join(directory, "ball.ts"),
        "export interface Ball {\n  roll(speed: string): Promise<void>;\n}\n",
      );
      const after = new ModuleChecker({ modulePath, source, hiddenNames: [] });
      expect(after.check(snippet)).toEqual([]);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("resolves the module's `/// <reference types>` as TypeScript does, letter case kept", () => {
    const directory = mkdtempSync(path.join(os.tmpdir(), "moss-check-"));
    try {
      const types = path.join(directory, "node_modules", "@types", "MixedCase");
      mkdirSync(types, { recursive: true });
      writeFileSync(path.join(types, "index.d.ts"), "interface MixedCaseShape {\n  size: number;\n}\n");
      const source =
        '/// <reference types="MixedCase" />\nexport function measure(shape: MixedCaseShape): number {\n  return shape.size;\n}\n';
      const modulePath = path.join(directory, "shapes.ts");
      writeFileSync(modulePath, source);
      const checker = new ModuleChecker({ modulePath, source, hiddenNames: [] });
      expect(checker.check("function main(moss: Moss) {\n  return measure({ size: 2 });\n}")).toEqual([]);
      const wrong = checker.check('function main(moss: Moss) {\n  return measure({ size: "2" });\n}');
      expect(wrong.map((diagnostic) => diagnostic.code)).toEqual([2322]);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("keeps working after dispose", () => {
    const session = spheroChecker();
    session.accept("const SLOW = 10;");
    expect(
      session.check("async function main(moss: Moss) {\n  await moss.body.spn(SLOW, 1);\n}")[0]?.code,
    ).toBe(2551);
    session.dispose();
    expect(session.check("async function main(moss: Moss) {\n  await moss.body.spin(SLOW, 1);\n}")).toEqual(
      [],
    );
  });
});

describe("large modules", () => {
  it("lists at most 30 names in the import message", () => {
    const declarations = Array.from({ length: 40 }, (_, index) => `export const value${index} = ${index};`);
    const large = new ModuleChecker({
      modulePath: path.join(FIXTURES, "large.ts"),
      source: `${declarations.join("\n")}\nexport class Moss {}\n`,
      hiddenNames: [],
    });
    const [diagnostic] = large.check(
      'import { value1 } from "./large.ts";\nfunction main(moss: Moss) {\n  return value1;\n}',
    );
    expect(diagnostic?.code).toBe(90002);
    expect(diagnostic?.message).toContain("value29");
    expect(diagnostic?.message).not.toContain("value30");
    expect(diagnostic?.message).toContain("and 11 more");
  });
});

describe("line endings", () => {
  it("maps positions in a snippet with CRLF line endings", () => {
    const [diagnostic] = checker.check(
      "async function main(moss) {\r\n  await moss.body.spn(90, 1);\r\n}\r\n",
    );
    expect(diagnostic).toMatchObject({ code: 2551, line: 2, column: 19 });
    expect(diagnostic?.frame).toBe("> 2 |   await moss.body.spn(90, 1);\n    |                   ^");
  });
});

describe("checker failures", () => {
  it("reports a failure of the compiler host as a warning, then recovers", () => {
    let unreadable = true;
    class FlakyFileSystem extends InMemoryFileSystemHost {
      override readFileSync(filePath: string, encoding?: string): string {
        if (unreadable && filePath.endsWith("/ball.ts")) {
          throw Object.assign(new Error(`EACCES: permission denied, open '${filePath}'`), { code: "EACCES" });
        }
        return super.readFileSync(filePath, encoding);
      }
    }
    const fileSystem = new FlakyFileSystem();
    fileSystem.writeFileSync(
      "/memory/ball.ts",
      "export interface Ball {\n  roll(speed: number): Promise<void>;\n}\n",
    );
    const source = 'import type { Ball } from "./ball.ts";\nexport class Moss {\n  body!: Ball;\n}\n';
    const project = new Project({ fileSystem, compilerOptions: { ...CHECK_COMPILER_OPTIONS, types: [] } });
    const flaky = new ModuleChecker({ modulePath: "/memory/robot.ts", source, hiddenNames: [], project });
    const snippet = 'async function main(moss: Moss) {\n  await moss.body.roll("fast");\n}';
    const [failure] = flaky.check(snippet);
    expect(failure).toMatchObject({
      code: MOSS_DIAGNOSTIC_CODES.checkerFailed,
      severity: "warning",
      line: 1,
    });
    expect(failure?.message).toContain("EACCES");
    unreadable = false;
    expect(flaky.check(snippet).map((diagnostic) => diagnostic.code)).toEqual([2345]);
  });
});

describe("@ts-ignore and @ts-expect-error", () => {
  it("silence a moss finding on the next line, as they silence TypeScript's", () => {
    expect(checker.check("function main(moss: Moss) {\n  // @ts-ignore\n  process.exit(1);\n}")).toEqual([]);
    expect(
      checker.check(
        "function main(moss: Moss) {\n  // @ts-expect-error: not in the sandbox\n  setTimeout(() => {}, 1);\n}",
      ),
    ).toEqual([]);
    expect(
      checker.check("// @ts-ignore\nimport { helper } from './sphero.ts';\nfunction main(moss: Moss) {}"),
    ).toEqual([]);
    expect(
      checker.check("function main(moss: Moss) {\n  // @ts-ignore\n\n  // why\n  console.table(1);\n}"),
    ).toEqual([]);
  });

  it("silence only the next code line", () => {
    const diagnostics = checker.check(
      "function main(moss: Moss) {\n  // @ts-ignore\n  const a = 1;\n  process.exit(a);\n}",
    );
    expect(diagnostics.map((diagnostic) => [diagnostic.code, diagnostic.line])).toEqual([[90004, 4]]);
  });

  it("an @ts-expect-error that silences nothing is still reported", () => {
    const diagnostics = checker.check(
      "function main(moss: Moss) {\n  // @ts-expect-error\n  moss.count = 1;\n}",
    );
    expect(diagnostics.map((diagnostic) => [diagnostic.code, diagnostic.line])).toEqual([[2578, 2]]);
  });
});

describe("a fresh project without @types/node", () => {
  it("knows the sandbox's console and reports Node's globals, without any compiler hint", () => {
    const directory = mkdtempSync(path.join(os.tmpdir(), "moss-fresh-"));
    const cwd = process.cwd();
    try {
      const source =
        "export class Moss {\n  count = 0;\n}\nexport function greet(name: string): string {\n  return 'hi ' + name;\n}\n";
      const modulePath = path.join(directory, "context.ts");
      writeFileSync(modulePath, source);
      // TypeScript resolves type packages from the current folder: make it one with no node_modules at all.
      process.chdir(directory);
      const fresh = new ModuleChecker({ modulePath, source, hiddenNames: [] });
      const clean =
        'function main(moss: Moss) {\n  console.log(greet("x"), moss.count);\n  console.info(1);\n  console.warn(2);\n  console.error(3);\n  console.debug(4);\n  moss.count = [1, 2].findLast((n) => n > 0) ?? 0;\n}';
      expect(fresh.check(clean)).toEqual([]);
      const hostCode =
        "function main(moss: Moss) {\n  setTimeout(() => {}, 1);\n  process.exit(1);\n  const b = Buffer.from('x');\n  console.table(b);\n  const s = new SharedArrayBuffer(8);\n  const r = new FinalizationRegistry(() => {});\n  const w = new WeakRef({});\n}";
      const diagnostics = fresh.check(hostCode);
      expect(diagnostics.map((diagnostic) => [diagnostic.code, diagnostic.line])).toEqual([
        [90004, 2],
        [90004, 3],
        [90004, 4],
        [90004, 5],
        [90004, 6],
        [90004, 7],
        [90004, 8],
      ]);
      const text = JSON.stringify(diagnostics);
      for (const hint of ["dom", "lib", "@types", "npm i", "tsconfig"]) expect(text).not.toContain(hint);
      const unknown = fresh.check("function main(moss: Moss) {\n  document.title = 'x';\n}");
      expect(unknown.map((diagnostic) => diagnostic.code)).toEqual([2304]);
      expect(unknown[0]!.message).toBe("Cannot find name 'document'.");
    } finally {
      process.chdir(cwd);
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("a context module that imports Node builtins keeps its own Node types", () => {
    const source =
      'import { readFileSync } from "node:fs";\nexport class Moss {\n  count = 0;\n}\nexport function size(file: string): number {\n  return readFileSync(file).length;\n}\n';
    const node = new ModuleChecker({
      modulePath: path.join(FIXTURES, "node-user.ts"),
      source,
      hiddenNames: [],
    });
    expect(
      node.check('function main(moss: Moss) {\n  moss.count = size("x");\n  console.log(1);\n}'),
    ).toEqual([]);
    const diagnostics = node.check("function main(moss: Moss) {\n  process.exit(1);\n  Buffer.alloc(1);\n}");
    expect(diagnostics.map((diagnostic) => diagnostic.code)).toEqual([90004, 90004]);
  });
});

describe("the visibility rule (membrane/visibility.ts) on host-declared classes", () => {
  const contextPath = fileURLToPath(new URL("../fixtures/membrane/visibility-context.ts", import.meta.url));
  let vault: ModuleChecker;
  beforeAll(() => {
    vault = new ModuleChecker({
      modulePath: contextPath,
      source: readFileSync(contextPath, "utf8"),
      hiddenNames: [],
    });
  });
  const unreachable = (code: string): Array<[number, number, string]> =>
    vault
      .check(code)
      .filter((diagnostic) => diagnostic.code === MOSS_DIAGNOSTIC_CODES.unreachableMember)
      .map((diagnostic) => [diagnostic.line, diagnostic.column, diagnostic.message]);

  it.each([
    ["a property access", "  return moss.vault._internalMethod();", "_internalMethod", 21],
    ["a lifecycle hook", "  moss.vault.onInject();", "onInject", 14],
    ["an optional chain", "  return moss.vault?.onDestroy();", "onDestroy", 22],
    ["an element access with a literal key", '  return moss.vault["onInject"]();', "onInject", 21],
    ["a template literal key", "  return moss.vault[`_internalMethod`]();", "_internalMethod", 21],
    ["TypeScript's private escape hatch", '  return moss.vault["secretMethod"]();', "secretMethod", 21],
    ["destructuring", "  const { open, caller } = moss.vault;", "caller", 17],
    ["renaming destructuring", "  const { arguments: args } = moss.vault;", "arguments", 11],
    ["nested destructuring", "  const { vault: { onInject } } = moss;", "onInject", 20],
    [
      "destructuring assignment",
      "  let hook: unknown;\n  ({ onDestroy: hook } = moss.vault);",
      "onDestroy",
      6,
    ],
    [
      "a key typed as one literal",
      '  const key = "_internalMethod" as const;\n  return moss.vault[key];',
      "_internalMethod",
      21,
    ],
    ["an `in` test", '  return "callee" in moss.vault;', "callee", 10],
    ["prototype plumbing", "  return moss.vault.constructor;", "constructor", 21],
    ["a hidden field of Moss", "  return moss._scratch;", "_scratch", 15],
  ])("refuses %s", (_label, body, name, column) => {
    const found = unreachable(`function main(moss: Moss) {\n${body}\n}`);
    expect(found).toHaveLength(1);
    const [line, at, message] = found[0]!;
    expect([line, at]).toEqual([body.split("\n").length + 1, column]);
    expect(message).toContain(`'${name}'`);
    expect(message).toContain("not reachable");
    // Nothing of the hidden declaration: not its class, its body, its type or its modifiers.
    for (const leak of ["reached", "string", "private", "protected", "Vault"])
      expect(message).not.toContain(leak);
  });

  it("accepts the reachable members of host objects", () => {
    expect(
      vault.check(
        'function main(moss: Moss) {\n  const { open } = moss.vault;\n  moss.shown = 2;\n  return [open(), moss.vault?.open(), moss.vault["open"](), "open" in moss.vault];\n}',
      ),
    ).toEqual([]);
  });

  it("leaves the snippet's own objects alone, `_private` fields and hooks included", () => {
    const code = [
      "class Counter {",
      "  _count = 0;",
      "  onInject(): void {}",
      "  bump(): number { return ++this._count; }",
      "}",
      "function main(moss: Moss) {",
      "  const counter = new Counter();",
      "  const { _count } = counter;",
      "  const plain = { _cache: [1], constructor: 1 };",
      '  counter.onInject(); counter["_count"] += 1;',
      '  return [counter.bump(), _count, plain._cache, plain.constructor, "_count" in counter, counter.constructor];',
      "}",
    ].join("\n");
    expect(vault.check(code)).toEqual([]);
  });
});
