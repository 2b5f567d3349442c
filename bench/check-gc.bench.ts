// Where a warm type-check's time goes besides TypeScript's own work: the young-generation garbage collections it
// causes. Runs warm checks of new snippets (the ledger module, ModuleChecker in this thread) in a child process traced
// with --trace-gc-nvp, and the same count of bare `ts.createProgram` calls over one small file as a baseline that holds
// no moss-ts code, and a churn of plain short-lived objects; prints the CPU per step, the scavenge pause per step
// and the share of young bytes promoted (garbage of a step that reaches the old generation, freed only by a mark-compact).
// That garbage is not held by moss-ts: a scavenge forced between two checks (gc({ type: "minor" })) keeps it too, a
// mark-compact frees all but the last checker, --minor-mc and --no-turbofan promote as much, and a bare
// `ts.createModuleResolutionCache` per step (no program) promotes about half of its bytes on some runs and none on
// others. A second row runs the same checks with V8's optimizing compiler off, for comparison only.
// Run: node --no-node-snapshot --import tsx bench/check-gc.bench.ts
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ts } from "ts-morph";

const SELF = fileURLToPath(import.meta.url);
const ROOT = fileURLToPath(new URL("../", import.meta.url));
const LEDGER_PATH = path.join(ROOT, "bench/fixtures/ledger-context.ts");
const WARM_UP = 100;
const MEASURED = 400;
/** Printed by the child between its warm-up and its measured checks: only the scavenges after it count. */
const MEASURED_MARK = "moss-check-gc-measured";
const LEDGER_CALLS = `async function main(moss: Moss) {
  const total = moss.ledger.add(1);
  const current = await moss.ledger.total();
  const label = moss.ledger.label("rent");
  return total + current + label.length;
}`;

type Workload = "checker" | "bare-program" | "plain-objects";

async function runChild(workload: Workload): Promise<void> {
  let step: (index: number) => void;
  if (workload === "checker") {
    const { ModuleChecker } = await import("../engine/check/index.ts");
    const checker = new ModuleChecker({
      modulePath: LEDGER_PATH,
      source: readFileSync(LEDGER_PATH, "utf8"),
      hiddenNames: ["MossCompiler", "__moss_compile__"],
    });
    step = (index) => {
      if (checker.check(`${LEDGER_CALLS}\n// snippet ${index}`).length > 0)
        throw new Error("unexpected diagnostics");
    };
  } else if (workload === "plain-objects") {
    // Short-lived objects and closures, no TypeScript call (TypeScript is loaded, as in the other two).
    let kept: unknown;
    step = (index) => {
      for (let item = 0; item < 2_000; item++) {
        const cache = new Map<number, string>([[item, `${index}`]]);
        kept = { get: () => cache.get(item), size: () => cache.size, item, text: `${index}:${item}` };
      }
      if (kept === undefined) throw new Error("unreachable");
    };
  } else {
    const fileName = "/moss-check-gc/snippet.ts";
    let text = "";
    const host: ts.CompilerHost = {
      getSourceFile: (name, version) =>
        name === fileName ? ts.createSourceFile(name, text, version) : undefined,
      getDefaultLibFileName: () => "/lib.d.ts",
      writeFile: () => {},
      getCurrentDirectory: () => "/moss-check-gc",
      getCanonicalFileName: (name) => name,
      useCaseSensitiveFileNames: () => true,
      getNewLine: () => "\n",
      fileExists: (name) => name === fileName,
      readFile: (name) => (name === fileName ? text : undefined),
    };
    const options: ts.CompilerOptions = { strict: true, noLib: true, types: [] };
    step = (index) => {
      text = `${LEDGER_CALLS.replaceAll("Moss", "any")}\n// snippet ${index}`;
      ts.createProgram({ rootNames: [fileName], options, host });
    };
  }
  for (let index = 0; index < WARM_UP; index++) step(index);
  process.stdout.write(`${MEASURED_MARK}\n`);
  const cpu = process.cpuUsage();
  for (let index = 0; index < MEASURED; index++) step(WARM_UP + index);
  const used = process.cpuUsage(cpu);
  process.stdout.write(`cpu=${(used.user + used.system) / 1000}\n`);
}

interface GcFigures {
  cpuMsPerStep: number;
  scavengePauseMsPerStep: number;
  scavenges: number;
  promotedShare: number;
}

function measure(workload: Workload, v8Flags: string[] = []): GcFigures {
  const child = spawnSync(
    process.execPath,
    ["--no-node-snapshot", "--trace-gc-nvp", ...v8Flags, "--import", "tsx", SELF, "--child", workload],
    { cwd: ROOT, encoding: "utf8", maxBuffer: 256 * 1024 * 1024 },
  );
  if (child.status !== 0) throw new Error(`the ${workload} child failed: ${child.stderr}`);
  const lines = child.stdout.split("\n");
  const measured = lines.slice(lines.indexOf(MEASURED_MARK) + 1);
  let pauseMs = 0;
  let allocated = 0;
  let promoted = 0;
  let scavenges = 0;
  for (const line of measured) {
    if (!/\bgc=s\b/.test(line)) continue;
    const field = (name: string): number => Number(new RegExp(`\\b${name}=([0-9.]+)`).exec(line)?.[1] ?? 0);
    scavenges++;
    pauseMs += field("pause");
    allocated += field("allocated");
    promoted += field("promoted");
  }
  const cpu = Number(/^cpu=([0-9.]+)$/m.exec(measured.join("\n"))?.[1] ?? Number.NaN);
  return {
    cpuMsPerStep: cpu / MEASURED,
    scavengePauseMsPerStep: pauseMs / MEASURED,
    scavenges,
    promotedShare: allocated > 0 ? promoted / allocated : 0,
  };
}

if (process.argv[2] === "--child") {
  await runChild(process.argv[3] as Workload);
} else if (process.argv[1] && path.resolve(process.argv[1]) === SELF) {
  for (const [label, workload, v8Flags] of [
    ["ledger: warm check of a new snippet (ModuleChecker, this thread)", "checker", []],
    // V8 flags are process-wide (a worker cannot have its own): this row only shows what V8's optimizing compiler
    // costs here. Each check makes a new checker, so TypeScript's ~1,000 nested functions are new closures each time.
    [
      "ledger: the same checks, V8's optimizing compiler off (--no-turbofan, comparison only)",
      "checker",
      ["--no-turbofan"],
    ],
    ["baseline: bare ts.createProgram of one small file (no moss-ts code)", "bare-program", []],
    ["baseline: 2,000 short-lived objects and closures (no TypeScript call)", "plain-objects", []],
  ] as const) {
    const figures = measure(workload, [...v8Flags]);
    console.log(
      `${label}\n  ${figures.cpuMsPerStep.toFixed(2)} ms CPU each; scavenges ${figures.scavenges}, ` +
        `${figures.scavengePauseMsPerStep.toFixed(2)} ms of scavenge pause each; ` +
        `${(figures.promotedShare * 100).toFixed(0)}% of the young bytes allocated were promoted (over ${MEASURED})`,
    );
  }
}
