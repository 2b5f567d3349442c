import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, test } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const script = path.join(root, "scripts", "check-arrows.js");

interface Violation {
  from: string;
  to: string;
  line: number;
  problem: string;
}
interface ArrowsReport {
  files: number;
  imports: number;
  violations: Violation[];
  stale: Array<{ from: string; to: string }>;
  folderCycles: number;
  cycles: Array<{ members: string[]; edges: string[] }>;
}

function runArrows(args: string[]) {
  const result = spawnSync(process.execPath, [script, ...args], { encoding: "utf8" });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

test("the repository keeps the layers: npm run check:arrows passes", () => {
  const run = runArrows([]);
  expect(run.stderr).toBe("");
  expect(run.status).toBe(0);
  // The graph is really read: hundreds of imports over every engine, container and moss-modules file.
  const counts = /check:arrows: (\d+) imports in (\d+) files keep the layers/.exec(run.stdout);
  expect(counts).not.toBeNull();
  expect(Number(counts?.[1])).toBeGreaterThan(300);
  expect(Number(counts?.[2])).toBeGreaterThan(100);
  // No two folders of engine/ reach each other, through value or type imports.
  expect(run.stdout).toMatch(/check:arrows: 0 folder cycle\(s\) in engine\/, type imports counted/);
});

test("a folder cycle is counted and fails the check, a type-only import closing it too", () => {
  const tree = mkdtempSync(path.join(tmpdir(), "moss-arrows-cycle-"));
  try {
    cpSync(path.join(root, "package.json"), path.join(tree, "package.json"));
    const plant = (file: string, text: string) => {
      mkdirSync(path.dirname(path.join(tree, file)), { recursive: true });
      writeFileSync(path.join(tree, file), text);
    };
    plant("engine/types.ts", "export type Limit = number;\n");
    plant(
      "engine/context/index.ts",
      'import { step } from "../sandbox/index.ts";\nexport const start = () => step;\n',
    );
    plant(
      "engine/sandbox/index.ts",
      'import type { start } from "../context/index.ts";\nexport const step = 1;\nexport type Start = typeof start;\n',
    );
    const report = JSON.parse(runArrows(["--root", tree, "--json"]).stdout) as ArrowsReport;
    expect(report.folderCycles).toBe(1);
    expect(report.cycles).toEqual([
      {
        members: ["engine/context/", "engine/sandbox/"],
        edges: [
          "engine/context/index.ts:1 → engine/sandbox/index.ts",
          "engine/sandbox/index.ts:1 → engine/context/index.ts",
        ],
      },
    ]);
    const run = runArrows(["--root", tree]);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain("folder cycle engine/context/ ↔ engine/sandbox/: ");
    expect(run.stdout).toContain("check:arrows: 1 folder cycle(s) in engine/, type imports counted");
  } finally {
    rmSync(tree, { recursive: true, force: true });
  }
});

test("npm run check runs check:arrows before the tests", () => {
  const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
  expect(manifest.scripts["check:arrows"]).toBe("node scripts/check-arrows.js");
  const check: string = manifest.scripts.check;
  expect(check).toContain("npm run check:arrows");
  expect(check.indexOf("npm run check:arrows")).toBeLessThan(check.indexOf("npm test"));
});

describe("why cli/ keeps deep imports: a command module loads no heavy package until its command runs", () => {
  const heavy = /\/node_modules\/(ts-morph|openai|isolated-vm[^/]*)\//;
  let hooks: string;

  beforeAll(() => {
    hooks = mkdtempSync(path.join(tmpdir(), "moss-arrows-hooks-"));
    writeFileSync(
      path.join(hooks, "hooks.mjs"),
      `export async function resolve(specifier, context, next) {
        const result = await next(specifier, context);
        if (${heavy}.test(result.url)) process.stderr.write("LOADED " + result.url + "\\n");
        return result;
      }\n`,
    );
    writeFileSync(
      path.join(hooks, "register.mjs"),
      `import { register } from "node:module";\nregister(${JSON.stringify(`file://${path.join(hooks, "hooks.mjs")}`)});\n`,
    );
  });
  afterAll(() => {
    rmSync(hooks, { recursive: true, force: true });
  });

  /** Imports the given engine files in a fresh Node and returns the heavy packages that loaded. */
  function heavyPackagesLoaded(files: string[]): string[] {
    const code = `for (const file of ${JSON.stringify(files)}) await import("./" + file); console.log("imported");`;
    const result = spawnSync(
      process.execPath,
      [
        "--no-node-snapshot",
        "--conditions=moss-ts-source",
        "--import",
        "tsx",
        "--import",
        path.join(hooks, "register.mjs"),
        "--input-type=module",
        "-e",
        code,
      ],
      { cwd: root, encoding: "utf8" },
    );
    expect(result.stdout).toContain("imported");
    return [
      ...new Set(
        [...result.stderr.matchAll(/^LOADED .*\/node_modules\/([^/]+)\//gm)].map((match) => match[1]!),
      ),
    ];
  }

  test("the harness sees a heavy package load (the compiler's front door loads ts-morph)", () => {
    expect(heavyPackagesLoaded(["engine/compiler/index.ts"])).toContain("ts-morph");
  });

  test("importing main and every command module loads neither ts-morph, openai nor isolated-vm", () => {
    const commands = ["agent", "check", "prompt", "run", "serve", "test"].map(
      (name) => `engine/cli/${name}-command.ts`,
    );
    expect(heavyPackagesLoaded(["engine/cli/main.ts", ...commands])).toEqual([]);
  });
});

describe("a copy of the repository with planted imports", () => {
  let copy: string;
  let report: ArrowsReport;
  let doorLine: number;

  const plant = (file: string, text: string) => writeFileSync(path.join(copy, file), text);

  beforeAll(() => {
    copy = mkdtempSync(path.join(tmpdir(), "moss-arrows-"));
    for (const folder of ["engine", "container", "moss-modules"]) {
      cpSync(path.join(root, folder), path.join(copy, folder), { recursive: true });
    }
    cpSync(path.join(root, "package.json"), path.join(copy, "package.json"));
    // Upward: the checker layer reaching the agent.
    plant(
      "engine/check/planted-upward.ts",
      'import { MossAgent } from "../agent/index.ts";\nexport { MossAgent };\n',
    );
    // A type-only deep import past the runtime's front door.
    plant(
      "engine/agent/planted-deep.ts",
      '\n\nimport type { MossRuntime } from "../runtime/moss-runtime.ts";\nexport type Held = MossRuntime;\n',
    );
    // A dynamic import and a re-export, both upward; imports inside a comment or a string are not imports.
    plant(
      "engine/runtime/planted-dynamic.ts",
      [
        '// import { main } from "../cli/main.ts";',
        "export const text = 'import \"../cli/main.ts\"';",
        'export const load = () => import("../cli/index.ts");',
        'export { startMossServer } from "../server/index.ts";',
        "",
      ].join("\n"),
    );
    // moss-modules: a public name from its defining file is fine; an internal of the membrane is not.
    plant(
      "moss-modules/planted.ts",
      [
        'import { MossError } from "../engine/errors.ts";',
        'import { HostMembrane } from "../engine/runtime/host-membrane.ts";',
        "export { HostMembrane, MossError };",
        "",
      ].join("\n"),
    );
    // Sideways is allowed, a cycle between peers is not: context and sandbox each import the other's front door.
    plant(
      "engine/sandbox/planted-peer.ts",
      'import { createContext } from "../context/index.ts";\nexport { createContext };\n',
    );
    plant(
      "engine/context/planted-peer.ts",
      'import { createSandboxDriver } from "../sandbox/index.ts";\nexport { createSandboxDriver };\n',
    );
    // The isolate half of the membrane: a host-only file of its own folder, and a package, are both refused.
    plant(
      "engine/membrane/isolate/planted-isolate.ts",
      [
        'import { isolateScript } from "../isolate-script.ts";',
        'import { readFileSync } from "node:fs";',
        'import { isReachableName } from "../visibility.ts";',
        'import type { HostOperation } from "../protocol.ts";',
        "export { isolateScript, isReachableName, readFileSync, type HostOperation };",
        "",
      ].join("\n"),
    );
    // A front door names its exports.
    const door = path.join(copy, "engine/prompter/index.ts");
    const doorText = readFileSync(door, "utf8");
    doorLine = doorText.split("\n").length;
    writeFileSync(door, `${doorText}export * from "./render-declaration.ts";\n`);
    // An allowed exception that no longer occurs must be deleted from the list (when this one is fixed for real,
    // plant the same with another entry of ALLOWED).
    const outputValidator = path.join(copy, "moss-modules/mcp/output-validator.ts");
    const source = readFileSync(outputValidator, "utf8");
    expect(source).toContain('import { runnableEntryAsync } from "../../engine/runnable-entry.ts";');
    writeFileSync(
      outputValidator,
      source.replace(
        'import { runnableEntryAsync } from "../../engine/runnable-entry.ts";',
        "const runnableEntryAsync = (..._args: unknown[]): unknown => undefined;",
      ),
    );
    report = JSON.parse(runArrows(["--root", copy, "--json"]).stdout) as ArrowsReport;
  });

  afterAll(() => {
    rmSync(copy, { recursive: true, force: true });
  });

  test("reports exactly the planted imports, each with its file, line and the rule it breaks", () => {
    const planted = report.violations.filter(
      (violation) => violation.from.includes("planted") || violation.from === "engine/prompter/index.ts",
    );
    const found = planted.map((violation) => `${violation.from}:${violation.line} -> ${violation.to}`);
    expect(found.sort()).toEqual(
      [
        `engine/prompter/index.ts:${doorLine} -> engine/prompter/render-declaration.ts`,
        "engine/sandbox/planted-peer.ts:1 -> engine/context/index.ts",
        "engine/context/planted-peer.ts:1 -> engine/sandbox/index.ts",
        "engine/agent/planted-deep.ts:3 -> engine/runtime/moss-runtime.ts",
        "engine/check/planted-upward.ts:1 -> engine/agent/index.ts",
        "engine/runtime/planted-dynamic.ts:3 -> engine/cli/index.ts",
        "engine/runtime/planted-dynamic.ts:4 -> engine/server/index.ts",
        "moss-modules/planted.ts:2 -> engine/runtime/host-membrane.ts",
        "engine/membrane/isolate/planted-isolate.ts:1 -> engine/membrane/isolate-script.ts",
        "engine/membrane/isolate/planted-isolate.ts:2 -> undefined",
      ].sort(),
    );
    const problem = (from: string) => report.violations.find((violation) => violation.from === from)?.problem;
    expect(problem("engine/check/planted-upward.ts")).toBe(
      "check/context/prompter/sandbox may not import agent (engine/agent/index.ts): imports point down the layers",
    );
    expect(problem("engine/agent/planted-deep.ts")).toBe(
      "deep import of engine/runtime/moss-runtime.ts: import engine/runtime/index.ts, the folder's front door",
    );
    expect(problem("engine/sandbox/planted-peer.ts")).toMatch(
      /^engine\/sandbox\/ and engine\/context\/ import each other \(also engine\/context\/[a-z-]+\.ts:\d+\)/,
    );
    const isolateProblems = report.violations
      .filter((violation) => violation.from === "engine/membrane/isolate/planted-isolate.ts")
      .map((violation) => violation.problem);
    expect(isolateProblems).toEqual([
      "the isolate half of the membrane may import only engine/membrane/isolate/, wire/, protocol.ts and visibility.ts, not engine/membrane/isolate-script.ts",
      "the isolate half of the membrane may import no package (node:fs): it is bundled into the script that runs beside model code",
    ]);
    expect(problem("engine/prompter/index.ts")).toBe(
      'front doors name their exports: replace `export * from "./render-declaration.ts"` with the names',
    );
    // The other side of the cycle is named too, and nothing of the unchanged code is reported.
    expect(problem("engine/context/planted-peer.ts")).toMatch(
      /^engine\/context\/ and engine\/sandbox\/ import each other \(also engine\/sandbox\/planted-peer\.ts:1\)/,
    );
    expect(report.violations.filter((violation) => !planted.includes(violation))).toEqual([]);
    expect(problem("moss-modules/planted.ts")).toMatch(
      /^moss-modules may import only the public API .*; HostMembrane from engine\/runtime\/host-membrane\.ts is not in it$/,
    );
  });

  test("an allowed exception that no longer occurs is reported", () => {
    expect(report.stale).toEqual([
      expect.objectContaining({
        from: "moss-modules/mcp/output-validator.ts",
        to: "engine/runnable-entry.ts",
      }),
    ]);
  });

  test("the command fails and names each planted import as file:line", () => {
    const run = runArrows(["--root", copy]);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(
      "engine/check/planted-upward.ts:1: check/context/prompter/sandbox may not import agent",
    );
    expect(run.stderr).toContain("moss-modules/planted.ts:2: moss-modules may import only the public API");
    expect(run.stderr).toContain(
      "the allowed import moss-modules/mcp/output-validator.ts → engine/runnable-entry.ts",
    );
  });
});
