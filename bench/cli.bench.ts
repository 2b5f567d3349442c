// CLI start-up and `moss check` wall times (issue 12), each as a ratio against its baseline measured in the same
// run, interleaved so both sides see the same machine load:
//   moss --help  vs  a bare `node -e 0`                         (target ≤ 3×)
//   moss check   vs  its own cold type-check in a fresh process  (target ≤ 2×): node start + import the checker
//                    + one ModuleChecker check of the same module and code, nothing else.
//   moss check / moss run of a trivial snippet  vs  a bare `node -e 0`  (target ≤ 10×, issue 17); moss check
//                    repeats a check the unmeasured round made, so it answers from its kept result: the same check
//                    with --no-cache is shown beside it (TypeScript loaded from its code cache, the check done again)
//   first moss prompt / check / run of a module, with and without a host setup file, against `node -e 0` (target
//                    ≤ 10×, issue 27): each round copies the module to a new folder, so no kept result applies (V8's
//                    code cache of moss-ts and TypeScript is warm, as on any machine that ran moss once); the same
//                    command repeated on that copy is shown beside it (kept results apply)
//   moss test of the module's 4 cases against `node -e 0` (target ≤ 15×, issue 27)
//   the same first commands and moss test through the warm path (docs/03-cli.md "The warm path"): the daemon's warm
//                    process ready when the command starts (a developer's next command after a pause); and one row
//                    of a first check that follows another command at once (the warm process still being made).
//                    Every other row runs with MOSS_NO_DAEMON=1: a process of its own, as before.
// The CLI is measured as installed users run it: built JavaScript (tsc -p tsconfig.build.json into bench/.tmp),
// started by bin/moss.js with plain `node` (bin/moss.js adds --no-node-snapshot itself, by starting again, where a
// command runs isolates in its own process). The source checkout's start (tsx registered first) is shown for comparison.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { copyFile, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildPublishedCli } from "./bench-fixtures.ts";
import { formatMs, formatRatio, percentile, printTable, verdict } from "./stats.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const BUILD = path.join(ROOT, "bench", ".tmp", "cli-build");
const SPHERO = path.join(ROOT, "examples", "sphero");
const SPHERO_FILES = ["context.ts", "bolt.ts", "simulated-bolt.ts"];
/** The sphero example beside the build, where its `import … from "moss-ts"` finds the built package. */
const MODULE = path.join(BUILD, "examples", "sphero", "context.ts");
const CODE =
  "async function main(moss: Moss) {\n  await moss.body.spin(90, 1);\n  return moss.body.history().length;\n}\n";
const START_RUNS = 9;
const CHECK_RUNS = 5;
/** The host setup file of the README's layout (`context.host.ts` beside `context.ts`): binds the ball itself. */
const HOST_SETUP = [
  'import type { MossCompiler } from "moss-ts";',
  'import { Ball } from "./bolt.ts";',
  'import { SimulatedBall } from "./simulated-bolt.ts";',
  "",
  "export function setup(compiler: MossCompiler): void {",
  "  compiler.bind(Ball, new SimulatedBall());",
  "}",
  "",
].join("\n");
let copies = 0;

/** A new copy of the sphero module (with the host setup file when `host`), where no kept result applies. */
async function freshModule(host: boolean): Promise<string> {
  const folder = path.join(BUILD, "examples", `sphero-${host ? "host" : "plain"}-${++copies}`);
  await mkdir(folder, { recursive: true });
  for (const file of SPHERO_FILES) await copyFile(path.join(SPHERO, file), path.join(folder, file));
  if (host) await writeFile(path.join(folder, "context.host.ts"), HOST_SETUP);
  return path.join(folder, "context.ts");
}

/** Wall time of one child process, which must exit 0; without the warm path unless `env` says where its daemon is. */
function timeProcess(args: string[], env: NodeJS.ProcessEnv = { MOSS_NO_DAEMON: "1" }): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const childEnv: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1", CI: "1", VITEST: "" };
    delete childEnv.MOSS_NO_DAEMON;
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...childEnv, ...env },
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("exit", (code) => {
      const elapsed = performance.now() - started;
      if (code === 0) resolve(elapsed);
      else reject(new Error(`${args.join(" ")} exited with ${code}\n${stderr.slice(-2000)}`));
    });
  });
}

/** Builds the CLI as it is published (dist/ + bin/) into bench/.tmp, plus the baseline's cold-check script. */
async function build(): Promise<{ bin: string; coldCheck: string; code: string }> {
  // package.json makes the build the package named moss-ts: the example's `import … from "moss-ts"` resolves to
  // the build's dist/ (from the repository's own folder it would need a dist/ built there).
  const bin = buildPublishedCli(BUILD);
  await mkdir(path.dirname(MODULE), { recursive: true });
  for (const file of SPHERO_FILES) {
    await copyFile(path.join(SPHERO, file), path.join(path.dirname(MODULE), file));
  }
  const code = path.join(BUILD, "snippet.ts");
  await writeFile(code, CODE);
  const coldCheck = path.join(BUILD, "cold-check.mjs");
  await writeFile(
    coldCheck,
    [
      'import { readFileSync } from "node:fs";',
      'const { ModuleChecker } = await import("./dist/engine/check/index.js");',
      "const [modulePath, codePath] = process.argv.slice(2);",
      'const checker = new ModuleChecker({ modulePath, source: readFileSync(modulePath, "utf8"), hiddenNames: [] });',
      'const diagnostics = checker.check(readFileSync(codePath, "utf8"));',
      'if (diagnostics.some((diagnostic) => diagnostic.severity === "error")) process.exit(1);',
    ].join("\n"),
  );
  return { bin, coldCheck, code };
}

/** The warm path's environment for the benchmark: a temp folder of its own, so its daemon is its own. */
function warmEnv(): NodeJS.ProcessEnv {
  return { TMPDIR: mkdtempSync(path.join(tmpdir(), "moss-bench-warm-")), MOSS_DAEMON_IDLE_SECONDS: "300" };
}

/** Waits until the daemon in `env`'s temp folder has a warm process ready (the state file it writes says so). */
async function daemonReady(env: NodeJS.ProcessEnv): Promise<void> {
  const folder = path.join(env.TMPDIR!, `moss-ts-${process.getuid?.()}`);
  const end = Date.now() + 60_000;
  while (Date.now() < end) {
    const states = existsSync(folder)
      ? readdirSync(folder).filter((name) => name.endsWith(".sock.state"))
      : [];
    for (const name of states) {
      try {
        if (JSON.parse(readFileSync(path.join(folder, name), "utf8")).ready === true) return;
      } catch {}
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no daemon became ready in ${folder}`);
}

function median(values: number[]): number {
  return percentile(values, 0.5);
}

/** Runs the CLI benchmark and prints its table. */
export async function run(): Promise<void> {
  const { bin, coldCheck, code } = await build();
  const sourceBin = path.join(ROOT, "bin", "moss.js");
  const figures = {
    node: [] as number[],
    help: [] as number[],
    helpSource: [] as number[],
    coldCheck: [] as number[],
    check: [] as number[],
    checkUncached: [] as number[],
    run: [] as number[],
    test: [] as number[],
  };
  /** First and repeated prompt / check / run of a module, plain and with a host setup file. */
  const commands = {
    prompt: (module: string) => [bin, "prompt", module],
    check: (module: string) => [bin, "check", module, "--code", code],
    run: (module: string) => [bin, "run", module, "--code", code],
  };
  const firsts: Record<string, { first: number[]; repeated: number[] }> = {};
  for (const name of Object.keys(commands)) {
    for (const host of [false, true]) firsts[`${name}${host ? " host" : ""}`] = { first: [], repeated: [] };
  }
  // One unmeasured round warms the OS file cache and tsx's transform cache.
  await timeProcess(["-e", "0"]);
  await timeProcess([bin, "--help"]);
  await timeProcess([sourceBin, "--help"]);
  await timeProcess([coldCheck, MODULE, code]);
  await timeProcess([bin, "check", MODULE, "--code", code]);
  await timeProcess([bin, "run", MODULE, "--code", code]);
  await timeProcess([bin, "test", MODULE]);
  for (let round = 0; round < START_RUNS; round++) {
    figures.node.push(await timeProcess(["-e", "0"]));
    figures.help.push(await timeProcess([bin, "--help"]));
    if (round < 5) figures.helpSource.push(await timeProcess([sourceBin, "--help"]));
  }
  for (let round = 0; round < CHECK_RUNS; round++) {
    figures.coldCheck.push(await timeProcess([coldCheck, MODULE, code]));
    figures.check.push(await timeProcess([bin, "check", MODULE, "--code", code]));
    figures.checkUncached.push(await timeProcess([bin, "check", MODULE, "--code", code, "--no-cache"]));
    figures.run.push(await timeProcess([bin, "run", MODULE, "--code", code]));
    figures.test.push(await timeProcess([bin, "test", MODULE]));
    for (const host of [false, true]) {
      for (const [name, command] of Object.entries(commands)) {
        const module = await freshModule(host);
        const row = firsts[`${name}${host ? " host" : ""}`]!;
        row.first.push(await timeProcess(command(module)));
        row.repeated.push(await timeProcess(command(module)));
      }
    }
  }
  // The warm path: the daemon's warm process ready before each measured first command.
  const warm = warmEnv();
  const warmRows: Record<string, number[]> = {};
  const warmRow = (name: string) => {
    warmRows[name] ??= [];
    return warmRows[name]!;
  };
  await timeProcess([bin, "prompt", MODULE], warm);
  for (let round = 0; round < CHECK_RUNS; round++) {
    for (const host of [false, true]) {
      for (const [name, command] of Object.entries(commands)) {
        const module = await freshModule(host);
        await daemonReady(warm);
        warmRow(`first moss ${name} (sphero${host ? ", host setup file" : ""}), warm path`).push(
          await timeProcess(command(module), warm),
        );
      }
    }
    await daemonReady(warm);
    warmRow("moss test (sphero, 4 cases), warm path").push(await timeProcess([bin, "test", MODULE], warm));
    // At once after another command: the warm process for it is still being made.
    await timeProcess(commands.prompt(await freshModule(false)), warm);
    warmRow("first moss check (sphero) right after another command, warm path (comparison)").push(
      await timeProcess(commands.check(await freshModule(false)), warm),
    );
  }
  spawnSync(process.execPath, [bin, "daemon", "stop"], { env: { ...process.env, ...warm } });
  // The stopped daemon may write its last log line while the folder goes.
  await rm(warm.TMPDIR!, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  await rm(BUILD, { recursive: true, force: true });

  const node = median(figures.node);
  const coldCheckMs = median(figures.coldCheck);
  const help = median(figures.help);
  const check = median(figures.check);
  const checkUncached = median(figures.checkUncached);
  const runMs = median(figures.run);
  const row = (figure: string, values: number[], target?: number): string[] => [
    figure,
    formatMs(median(values)),
    formatMs(percentile(values, 0.9)),
    String(values.length),
    formatRatio(median(values), node),
    target === undefined ? "" : `≤ ${target}×`,
    target === undefined ? "" : verdict(median(values) / node, target),
  ];
  const firstRows: string[][] = [];
  for (const [name, { first, repeated }] of Object.entries(firsts)) {
    const [command, host] = name.split(" ");
    const what = `moss ${command} (sphero${host ? ", host setup file" : ""})`;
    firstRows.push(row(`first ${what}`, first, 10));
    firstRows.push(row(`repeated ${what} (comparison)`, repeated));
  }
  printTable(
    "cli: start-up and check, wall time of a fresh process (built JavaScript, as installed)",
    ["figure", "median", "p90", "samples", "ratio to baseline", "target", "verdict"],
    [
      [
        "baseline: node -e 0",
        formatMs(node),
        formatMs(percentile(figures.node, 0.9)),
        String(figures.node.length),
        "1.00×",
        "",
        "",
      ],
      [
        "moss --help",
        formatMs(help),
        formatMs(percentile(figures.help, 0.9)),
        String(figures.help.length),
        formatRatio(help, node),
        "≤ 3×",
        verdict(help / node, 3),
      ],
      [
        "moss --help from a source checkout (tsx first; comparison)",
        formatMs(median(figures.helpSource)),
        formatMs(percentile(figures.helpSource, 0.9)),
        String(figures.helpSource.length),
        formatRatio(median(figures.helpSource), node),
        "",
        "",
      ],
      [
        "baseline: cold type-check alone, fresh process (sphero)",
        formatMs(coldCheckMs),
        formatMs(percentile(figures.coldCheck, 0.9)),
        String(figures.coldCheck.length),
        "1.00×",
        "",
        "",
      ],
      [
        "moss check (sphero)",
        formatMs(check),
        formatMs(percentile(figures.check, 0.9)),
        String(figures.check.length),
        formatRatio(check, coldCheckMs),
        "≤ 2×",
        verdict(check / coldCheckMs, 2),
      ],
      [
        "moss check (sphero), against node -e 0",
        formatMs(check),
        formatMs(percentile(figures.check, 0.9)),
        String(figures.check.length),
        formatRatio(check, node),
        "≤ 10×",
        verdict(check / node, 10),
      ],
      [
        "moss check --no-cache (sphero), against node -e 0",
        formatMs(checkUncached),
        formatMs(percentile(figures.checkUncached, 0.9)),
        String(figures.checkUncached.length),
        formatRatio(checkUncached, node),
        "≤ 10×",
        verdict(checkUncached / node, 10),
      ],
      [
        "moss run (sphero, strict check, process sandbox), against node -e 0",
        formatMs(runMs),
        formatMs(percentile(figures.run, 0.9)),
        String(figures.run.length),
        formatRatio(runMs, node),
        "≤ 10×",
        verdict(runMs / node, 10),
      ],
      ...firstRows,
      row("moss test (sphero, 4 cases, in-process sandbox), against node -e 0", figures.test, 15),
      ...Object.entries(warmRows).map(([name, values]) =>
        row(name, values, name.includes("comparison") ? undefined : name.startsWith("moss test") ? 15 : 10),
      ),
    ],
    [
      "Rounds interleave each figure with its baseline. The cold type-check baseline is node start + importing the",
      "checker (ts-morph) + one ModuleChecker check of the same module and code; moss check also loads the module",
      "on the host (tsx, its hooks, its imports), runs its hooks and resolves its services. moss check repeats the",
      "unmeasured round's check: it answers from its kept result (see --no-cache for the check done again).",
      "A first command runs on a new copy of the module (no kept result applies; code caches warm); its repeat runs",
      "on the same copy. Ratios of the first/repeated/test rows are against node -e 0.",
      "Rows without 'warm path' run with MOSS_NO_DAEMON=1 (a process of their own). Warm-path rows start once the",
      "daemon's warm process is ready (the client's start, its key and the relay included); the comparison row",
      "starts at once after another command, while the warm process for it is still being made.",
    ],
  );
}
