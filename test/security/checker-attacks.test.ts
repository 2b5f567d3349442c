// Attacks on the type-checker of model code (issue 8, classes 1 and 2): the checker sees exactly the world the
// prompt shows, and checking is bounded work that never stalls the host.
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Project } from "ts-morph";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CheckHost } from "../../engine/check/check-host.ts";
import { CHECK_COMPILER_OPTIONS, MOSS_DIAGNOSTIC_CODES } from "../../engine/check/index.ts";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { Diagnostic, ExecutionLimits } from "../../engine/types.ts";
import { watchHostLoop } from "../helpers/host-loop-watch.ts";

/** Values that exist only on the host: no diagnostic may ever print one. */
const SECRETS = {
  hiddenConstant: "hidden-value-7f3a",
  hiddenKey: "hidden-key-9c1d",
  hiddenGlobal: "hidden-global-4b2e",
  hiddenMember: "hidden-member-5e6f",
  hostFile: "host-secret-2d8e",
  json: "json-secret-6a1b",
  jsonKey: "dbPasswordKey",
  packageToken: "pkg-secret-8c3f",
  referencedGlobal: "ref-secret-1e9a",
  ambientModule: "ambient-secret-3c7d",
};

/** Names declared only in the hidden region: no diagnostic may print one the model did not type itself. */
const HIDDEN_NAMES = [
  "HIDDEN_SECRET",
  "HiddenShape",
  "hiddenFactory",
  "HIDDEN_GLOBAL",
  "hiddenMember",
  "hiddenKey",
];

const CONTEXT = `/// <reference path="./ambient.d.ts" />
import type { Gadget } from "./gadget.ts";

/** The most spins per call. */
export const VISIBLE_LIMIT = 3;

/** What the model may use. */
export class Moss {
  count = 0;
  gadget?: Gadget;
}

/** A visible helper. */
export function visibleHelper(): number {
  return VISIBLE_LIMIT;
}

// <moss-hide>
export const HIDDEN_SECRET = "${SECRETS.hiddenConstant}";
type HiddenShape = { hiddenKey: "${SECRETS.hiddenKey}" };
export function hiddenFactory(): HiddenShape {
  return { hiddenKey: "${SECRETS.hiddenKey}" };
}
declare global {
  var HIDDEN_GLOBAL: "${SECRETS.hiddenGlobal}";
}
export interface Moss {
  hiddenMember: "${SECRETS.hiddenMember}";
}
// </moss-hide>
`;

let folder: string;
let runtime: MossRuntime;

function hostPaths(): string[] {
  const paths = [folder, realpathSync(folder), os.tmpdir(), process.cwd(), "/node_modules/", "node_modules"];
  const home = os.homedir();
  if (home.length > 1) paths.push(`${home}/`);
  return paths;
}

/** No hidden value, hidden name (unless the model wrote it) or host path in any text of any diagnostic. */
function expectNoLeak(diagnostics: Diagnostic[], snippet: string): void {
  const text = JSON.stringify(diagnostics);
  for (const secret of Object.values(SECRETS)) expect(text, `leaks ${secret}`).not.toContain(secret);
  for (const hostPath of hostPaths()) {
    if (!snippet.includes(hostPath)) expect(text, `leaks ${hostPath}`).not.toContain(hostPath);
  }
  for (const name of HIDDEN_NAMES) {
    if (!snippet.includes(name)) expect(text, `leaks ${name}`).not.toContain(name);
  }
}

function codes(diagnostics: Diagnostic[]): number[] {
  return diagnostics.map((diagnostic) => diagnostic.code);
}

beforeAll(async () => {
  folder = mkdtempSync(path.join(os.tmpdir(), "moss-checker-attacks-"));
  writeFileSync(path.join(folder, "context.ts"), CONTEXT);
  writeFileSync(
    path.join(folder, "gadget.ts"),
    "export interface Gadget {\n  spin(turns: number): void;\n}\n",
  );
  writeFileSync(path.join(folder, "secret.ts"), `export const HOST_API_KEY = "${SECRETS.hostFile}";\n`);
  writeFileSync(
    path.join(folder, "ambient.d.ts"),
    `declare module "host-config" {\n  export const CONFIG_TOKEN: "${SECRETS.ambientModule}";\n}\n`,
  );
  writeFileSync(path.join(folder, "data.json"), JSON.stringify({ [SECRETS.jsonKey]: SECRETS.json }));
  writeFileSync(
    path.join(folder, "globals.d.ts"),
    `declare var REFERENCED: "${SECRETS.referencedGlobal}";\n`,
  );
  const pkg = path.join(folder, "node_modules", "secret-pkg");
  mkdirSync(pkg, { recursive: true });
  writeFileSync(path.join(pkg, "package.json"), JSON.stringify({ name: "secret-pkg", types: "index.d.ts" }));
  writeFileSync(
    path.join(pkg, "index.d.ts"),
    `export declare const PKG_TOKEN: "${SECRETS.packageToken}";\ndeclare global { var PKG_GLOBAL: "${SECRETS.packageToken}"; }\n`,
  );
  runtime = await new MossCompiler({ sandbox: "in-process" }).compile(path.join(folder, "context.ts"));
});

afterAll(async () => {
  await runtime?.close();
  rmSync(folder, { recursive: true, force: true });
});

describe("class 1: the checker reads nothing the prompt does not show", () => {
  const printed = (type: string): string => `const probe: number = null as unknown as ${type};\n`;

  it.each([
    ["the context module itself, as a namespace", printed('typeof import("./context.ts")')],
    [
      "the context module's keys, through a mapped type",
      `type Keys = { [K in keyof typeof import("./context.ts")]: K };\n${printed("Keys[keyof Keys]")}`,
    ],
    [
      "the context module's values, through a mapped type",
      `type Values = { -readonly [K in keyof typeof import("./context")]: (typeof import("./context"))[K] };\n${printed("Values")}`,
    ],
    ["a sibling host file", printed('(typeof import("./secret.ts"))["HOST_API_KEY"]')],
    ["a host file by absolute path", () => printed(`typeof import(${JSON.stringify(`${folder}/secret`)})`)],
    ["a JSON file (resolveJsonModule)", printed('typeof import("./data.json")')],
    ["a JSON file's keys", printed('keyof typeof import("./data.json")')],
    ["a package in node_modules", printed('typeof import("secret-pkg")')],
    ["an ambient module a host .d.ts declares", printed('typeof import("host-config")')],
    ["an import type in a type argument", printed('Array<import("./secret.ts").Nope>')],
    ["an import type in a generic default", `type G<T = typeof import("./secret.ts")> = T;\n${printed("G")}`],
  ])("a type-level import of %s is refused and resolves nothing", async (_name, attack) => {
    const snippet = typeof attack === "function" ? attack() : attack;
    const diagnostics = await runtime.typecheck(snippet);
    expect(codes(diagnostics)).toContain(MOSS_DIAGNOSTIC_CODES.importStatement);
    expectNoLeak(diagnostics, snippet);
  });

  it.each([
    ["a reference path", `/// <reference path="./globals.d.ts" />\n${printed("typeof REFERENCED")}`],
    [
      "a reference to a package's types",
      `/// <reference types="secret-pkg" />\n${printed("typeof PKG_GLOBAL")}`,
    ],
    ["a reference to the DOM library", `/// <reference lib="dom" />\n${printed("typeof document")}`],
    [
      "an augmentation of the context module",
      `declare module "./context.ts" {\n  interface Moss { leak: typeof HIDDEN_SECRET }\n}\n${printed("Moss['leak']")}`,
    ],
    [
      "an augmentation of a package",
      `declare module "secret-pkg" {\n  export const more: 1;\n}\n${printed('typeof import("secret-pkg")')}`,
    ],
    [
      "a global augmentation",
      `declare global {\n  var extra: typeof HIDDEN_GLOBAL;\n}\n${printed("typeof extra")}`,
    ],
  ])("%s is refused and reads nothing", async (_name, snippet) => {
    const diagnostics = await runtime.typecheck(snippet);
    expect(codes(diagnostics)).toContain(MOSS_DIAGNOSTIC_CODES.ambientDeclaration);
    expectNoLeak(diagnostics, snippet);
  });

  it.each([
    ["require()", 'const secret = require("./secret.ts");\nconst n: number = secret;'],
    ["import.meta", "const where: number = import.meta as any;"],
    [
      "a dynamic import()",
      'async function main() {\n  const m = await import("./secret.ts");\n  const n: number = m;\n}',
    ],
    ["import = require", 'import s = require("./secret.ts");\nconst n: number = s;'],
    [
      "a dynamic import() of an ambient module",
      'async function main() {\n  const m = await import("host-config");\n  const probe: 5 = m.CONFIG_TOKEN;\n  const all: { x: 1 } = { ...m };\n}',
    ],
  ])("%s is an import the sandbox does not have", async (_name, snippet) => {
    const diagnostics = await runtime.typecheck(snippet);
    expect(codes(diagnostics)).toContain(MOSS_DIAGNOSTIC_CODES.importStatement);
    expectNoLeak(diagnostics, snippet);
  });

  it("a hidden global declared by the context module is not in the model's scope", async () => {
    const snippet = printed("typeof HIDDEN_GLOBAL");
    const diagnostics = await runtime.typecheck(snippet);
    expect(diagnostics.some((diagnostic) => diagnostic.severity === "error")).toBe(true);
    expectNoLeak(diagnostics, snippet);
  });

  it("a hidden declaration merged into a visible class adds no member the model can see", async () => {
    const snippet = `function main(moss: Moss) {\n${printed(`{ [K in keyof Moss as \`k_\${K & string}\`]: Moss[K] }`)}}`;
    const diagnostics = await runtime.typecheck(snippet);
    expect(codes(diagnostics)).toEqual([2322]);
    expect(diagnostics[0]!.message).toContain("k_count");
    expectNoLeak(diagnostics, snippet);
  });

  it("types of the module's imports print without host paths", async () => {
    const snippet =
      "function main(moss: Moss) {\n  const g: number = moss.gadget!;\n  const s: string = moss.gadget!.spin;\n}";
    const diagnostics = await runtime.typecheck(snippet);
    expect(codes(diagnostics)).toEqual([2322, 2322]);
    expectNoLeak(diagnostics, snippet);
  });

  it("a type-level import in code that ran unchecked is not resolved by later checks", async () => {
    const defining = `type Leak = typeof import("./secret.ts");\ntype LeakKeys = keyof typeof import("./data.json");\nfunction main() { return 1; }`;
    const execution = await runtime.execute({ code: defining, typeCheck: "off" });
    expect(execution.ok).toBe(true);
    const snippet = `${printed("Leak")}${printed("LeakKeys")}`;
    const diagnostics = await runtime.typecheck(snippet);
    expectNoLeak(diagnostics, snippet);
  });

  it("a type-level import cannot even be resolved by the check host: only the checker's own prelude is", () => {
    const project = new Project({
      compilerOptions: CHECK_COMPILER_OPTIONS,
      skipAddingFilesFromTsConfig: true,
    });
    const host = new CheckHost(project, false);
    const model = path.join(folder, ".model.ts");
    const prelude = 'import { VISIBLE_LIMIT } from "./context.ts";';
    host.setVirtual(
      model,
      `${prelude}\nimport { VISIBLE_LIMIT as again } from "./context";\nconst probe: number = null as unknown as typeof import("./secret.ts");\nexport {};`,
      { modelPreludeEnd: prelude.length },
    );
    const program = host.program([model]);
    const sourceFile = program.getSourceFile(model)!;
    const messages = program
      .getSemanticDiagnostics(sourceFile)
      .map((diagnostic) => [diagnostic.code, String(diagnostic.messageText)]);
    // An import after the prelude, and the type-level import, both stay unresolved (TS2307); the prelude resolves.
    expect(
      messages.filter(([code]) => code === 2307),
      JSON.stringify(messages),
    ).toHaveLength(2);
    expect(JSON.stringify(messages)).not.toContain(SECRETS.hostFile);
  });
});

/** A type bomb: `copies` distinct conditional types, each mapped over a union of ten thousand template literals. */
function typeBomb(copies: number): string {
  const lines = [
    "type Digit = 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9;",
    `type Two = \`\${Digit}\${Digit}\`;`,
    `type Four = \`\${Two}\${Two}\`;`,
  ];
  for (let index = 0; index < copies; index++) {
    lines.push(`type Split${index}<T> = T extends \`\${infer A}\${infer B}\` ? [A, B, T, ${index}] : never;`);
    lines.push(`const probe${index}: Split${index}<Four> = 0 as unknown as string;`);
  }
  return lines.join("\n");
}

/**
 * A generous bound for "the host's event loop kept running": a blocking check takes seconds. The host's own GC pauses
 * are left out (`excludeGcPauses`): the check runs in a worker, and on Node 24 under load a major GC of this test
 * process's heap alone stalled the loop for 560–650 ms while the worker ran out of memory.
 */
const MAX_LOOP_LAG_MS = 500;
const GC_EXCLUDED = { excludeGcPauses: true };

describe("class 2: type-checking is bounded work off the host's thread", () => {
  async function compileWith(limits: Partial<ExecutionLimits>): Promise<MossRuntime> {
    return new MossCompiler({ sandbox: "in-process", limits }).compile(path.join(folder, "context.ts"));
  }

  it.each([
    ["recursive conditional types over a huge union", typeBomb(8)],
    [
      "deeply recursive tuple types",
      "type Grow<A extends unknown[], N extends unknown[]> = N extends [unknown, ...infer R] ? Grow<[...A, ...A], R> : A;\n" +
        Array.from(
          { length: 40 },
          (_, index) =>
            `const t${index}: Grow<[${index}], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]> = 0 as unknown as Grow<[${index + 1}], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]>;`,
        ).join("\n"),
    ],
  ])("%s end with a located limit error, the host loop never blocked", async (_name, bomb) => {
    const limited = await compileWith({ typeCheckTimeoutMs: 1_000 });
    try {
      const watched = await watchHostLoop(
        () => limited.typecheck(`${bomb}\nfunction main(moss: Moss) {}`),
        GC_EXCLUDED,
      );
      expect(watched.maxBlockMs).toBeLessThan(MAX_LOOP_LAG_MS);
      expect(watched.value).toEqual([
        expect.objectContaining({
          code: MOSS_DIAGNOSTIC_CODES.checkLimit,
          severity: "error",
          line: 1,
          column: 1,
          message: expect.stringContaining("the type-check exceeded its limit"),
        }),
      ]);
      // The next check starts a fresh worker that still knows the module.
      expect(
        await limited.typecheck("function main(moss: Moss) {\n  moss.count = VISIBLE_LIMIT;\n}"),
      ).toEqual([]);
    } finally {
      await limited.close();
    }
  });

  it("a bomb that runs out of the worker's memory is a limit error, and the host lives on", async () => {
    const limited = await compileWith({
      typeCheckTimeoutMs: 120_000,
      typeCheckMemoryBytes: 160 * 1024 * 1024,
    });
    try {
      const watched = await watchHostLoop(() => limited.typecheck(typeBomb(30)), GC_EXCLUDED);
      expect(watched.maxBlockMs).toBeLessThan(MAX_LOOP_LAG_MS);
      expect(watched.value).toEqual([
        expect.objectContaining({
          code: MOSS_DIAGNOSTIC_CODES.checkLimit,
          message: expect.stringMatching(/exceeded its limit \(160 MiB of memory\)/),
        }),
      ]);
      expect(await limited.typecheck("function main(moss: Moss) {\n  moss.count = 1;\n}")).toEqual([]);
    } finally {
      await limited.close();
    }
  });

  it("a strict execute of a bomb fails with kind type, promptly, and the runtime keeps working", async () => {
    const limited = await compileWith({ typeCheckTimeoutMs: 1_000 });
    try {
      const watched = await watchHostLoop(
        () => limited.execute({ code: `${typeBomb(8)}\nfunction main(moss: Moss) { return 1; }` }),
        GC_EXCLUDED,
      );
      expect(watched.maxBlockMs).toBeLessThan(MAX_LOOP_LAG_MS);
      expect(watched.value.ok).toBe(false);
      expect(watched.value.error).toMatchObject({ kind: "type", line: 1, column: 1 });
      expect(watched.value.error?.message).toContain("the type-check exceeded its limit");
      const healthy = await limited.execute({
        code: "function main(moss: Moss) { return VISIBLE_LIMIT + 1; }",
      });
      expect(healthy).toMatchObject({ ok: true, returns: 4 });
    } finally {
      await limited.close();
    }
  });

  it("a per-execute type-check time limit applies to that execute", async () => {
    const watched = await watchHostLoop(
      () =>
        runtime.execute({
          code: `${typeBomb(8)}\nfunction main(moss: Moss) { return 1; }`,
          limits: { typeCheckTimeoutMs: 800 },
        }),
      GC_EXCLUDED,
    );
    expect(watched.maxBlockMs).toBeLessThan(MAX_LOOP_LAG_MS);
    expect(watched.value.error?.kind).toBe("type");
    expect(watched.value.error?.message).toContain("(800 ms)");
  });

  it("definitions accepted before a worker ended are known to the next worker", async () => {
    const limited = await compileWith({ typeCheckTimeoutMs: 1_000 });
    try {
      const defined = await limited.execute({
        code: "function triple(n: number): number { return n * 3; }\nfunction main() { return triple(1); }",
      });
      expect(defined.ok).toBe(true);
      const bombed = await limited.typecheck(typeBomb(8));
      expect(bombed[0]?.code).toBe(MOSS_DIAGNOSTIC_CODES.checkLimit);
      expect(await limited.typecheck("function main(moss: Moss) {\n  moss.count = triple(2);\n}")).toEqual(
        [],
      );
      const wrong = await limited.typecheck('function main(moss: Moss) {\n  moss.count = triple("x");\n}');
      expect(wrong.map((diagnostic) => diagnostic.code)).toEqual([2345]);
    } finally {
      await limited.close();
    }
  });
});
