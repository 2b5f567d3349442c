// Type-check timings of ModuleChecker: cold first check, warm re-check, re-check after updateSource; and of the
// worker-backed WorkerModuleChecker the runtime uses (cold start of a worker, warm re-check through it).
// Run: node --no-node-snapshot --import tsx bench/check.bench.ts
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Project } from "ts-morph";
import {
  CHECK_COMPILER_OPTIONS,
  ModuleChecker,
  WorkerModuleChecker,
  warmCheckerPool,
} from "../engine/check/index.ts";
import { FLAWED_SNIPPETS, SPHERO_HIDDEN_NAMES, VALID_SNIPPETS } from "../test/fixtures/check/corpus.ts";

/** One measured figure: the median of its samples. */
export interface BenchResult {
  name: string;
  /** Median wall-clock time. */
  medianMs: number;
  /** Median CPU time of the process (user + system) over the same samples: steadier on a busy machine. */
  medianCpuMs: number;
  samples: number;
}

interface Sample {
  wallMs: number;
  cpuMs: number;
}

interface ModuleUnderTest {
  label: string;
  modulePath: string;
  source: string;
  hiddenNames: string[];
  snippets: string[];
}

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const COLD_RUNS = 5;
const WARM_RUNS = 60;
const UPDATE_RUNS = 15;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

async function timeAsync(action: () => Promise<unknown>): Promise<Sample> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  await action();
  const wallMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { wallMs, cpuMs: (used.user + used.system) / 1000 };
}

function time(action: () => void): Sample {
  const cpu = process.cpuUsage();
  const start = performance.now();
  action();
  const wallMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { wallMs, cpuMs: (used.user + used.system) / 1000 };
}

/** A context module with `count` declarations of each of five kinds (interfaces, types, functions, classes, consts). */
export function generatedModule(count: number): string {
  const lines = ['import { Moss as Parent } from "moss-ts";', ""];
  const perKind = Math.ceil(count / 5);
  for (let index = 0; index < perKind; index++) {
    lines.push(
      `/** Record ${index}. */`,
      `export interface Record${index} { id: number; label: string; next?: Record${index} }`,
      `export type Key${index} = keyof Record${index} | "extra${index}";`,
      `/** Makes record ${index}. */`,
      `export function make${index}(id: number, label: string): Record${index} { return { id, label }; }`,
      `export abstract class Service${index} {`,
      `  abstract fetch(key: Key${index}): Promise<Record${index}[]>;`,
      "  abstract size(): number;",
      "}",
      `export const LIMIT_${index} = ${index * 10};`,
    );
  }
  lines.push("export class Moss extends Parent {");
  for (let index = 0; index < perKind; index++) lines.push(`  service${index}!: Service${index};`);
  lines.push("  count = 0;", "}");
  return lines.join("\n");
}

function generatedSnippets(count: number): string[] {
  return Array.from({ length: 40 }, (_, index) => {
    const n = (index * 7) % Math.ceil(count / 5);
    return [
      "async function main(moss: Moss) {",
      `  const records = await moss.service${n}.fetch("label");`,
      `  const made = make${n}(${index}, "x");`,
      `  return records.length + made.id + LIMIT_${n} + moss.service${n}.size() + moss.count;`,
      "}",
    ].join("\n");
  });
}

function modules(): ModuleUnderTest[] {
  const spheroPath = path.join(ROOT, "test/fixtures/check/sphero.ts");
  return [
    {
      label: "sphero",
      modulePath: spheroPath,
      source: readFileSync(spheroPath, "utf8"),
      hiddenNames: SPHERO_HIDDEN_NAMES,
      snippets: [...FLAWED_SNIPPETS, ...VALID_SNIPPETS].map((snippet) => snippet.code),
    },
    {
      label: "generated 200 declarations",
      modulePath: path.join(ROOT, "bench/.generated-200.ts"),
      source: generatedModule(200),
      hiddenNames: [],
      snippets: generatedSnippets(200),
    },
  ];
}

function createChecker(module: ModuleUnderTest): ModuleChecker {
  return new ModuleChecker({
    modulePath: module.modulePath,
    source: module.source,
    hiddenNames: module.hiddenNames,
  });
}

function createWorkerChecker(module: ModuleUnderTest): WorkerModuleChecker {
  return new WorkerModuleChecker({
    modulePath: module.modulePath,
    source: module.source,
    hiddenNames: module.hiddenNames,
  });
}

/** The alternative strategy: the module source with the snippet appended, in one file checked whole. */
function appendedChecker(module: ModuleUnderTest): (snippet: string) => number {
  const project = new Project({ compilerOptions: CHECK_COMPILER_OPTIONS, skipAddingFilesFromTsConfig: true });
  const filePath = path.join(path.dirname(module.modulePath), ".appended-bench.ts");
  return (snippet) => {
    const file = project.createSourceFile(filePath, `${module.source}\n${snippet}`, { overwrite: true });
    const program = project.getProgram().compilerObject;
    const sourceFile = program.getSourceFile(file.getFilePath())!;
    return (
      program.getSyntacticDiagnostics(sourceFile).length + program.getSemanticDiagnostics(sourceFile).length
    );
  };
}

/** Measures every figure of the benchmark and returns the medians. */
export async function run(): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  const record = (name: string, samples: Sample[]): void => {
    results.push({
      name,
      medianMs: median(samples.map((sample) => sample.wallMs)),
      medianCpuMs: median(samples.map((sample) => sample.cpuMs)),
      samples: samples.length,
    });
  };
  let firstInProcess = true;
  for (const module of modules()) {
    const first = module.snippets[0]!;
    const cold: Sample[] = [];
    for (let run = 0; run < COLD_RUNS; run++) {
      const sample = time(() => createChecker(module).check(first));
      if (firstInProcess) record(`${module.label}: cold first check, fresh process`, [sample]);
      else cold.push(sample);
      firstInProcess = false;
    }
    record(`${module.label}: cold first check, new checker (lib files already parsed)`, cold);

    const checker = createChecker(module);
    checker.check(first);
    const warm: Sample[] = [];
    for (let run = 0; run < WARM_RUNS; run++) {
      const snippet = `${module.snippets[run % module.snippets.length]}\n// run ${run}`;
      warm.push(time(() => checker.check(snippet)));
    }
    record(`${module.label}: warm re-check of a new snippet`, warm);

    const updated: Sample[] = [];
    for (let run = 0; run < UPDATE_RUNS; run++) {
      const source = `${module.source}\n// revision ${run}\n`;
      const snippet = `${module.snippets[run % module.snippets.length]}\n// update ${run}`;
      updated.push(
        time(() => {
          checker.updateSource(source);
          checker.check(snippet);
        }),
      );
    }
    record(`${module.label}: re-check after updateSource`, updated);

    checker.accept("function previousHelper(value: number): number {\n  return value + 1;\n}");
    const withPrevious: Sample[] = [];
    for (let run = 0; run < WARM_RUNS; run++) {
      const snippet = `function main(moss: Moss) {\n  return previousHelper(${run});\n}`;
      withPrevious.push(time(() => checker.check(snippet)));
    }
    record(`${module.label}: warm re-check with an accepted definition`, withPrevious);
    checker.dispose();

    // The runtime's path: the same checks in a worker thread (CPU figures include the worker's thread).
    const workerCold: Sample[] = [];
    for (let run = 0; run < COLD_RUNS; run++) {
      const worker = createWorkerChecker(module);
      workerCold.push(await timeAsync(() => worker.check(first)));
      await worker.close();
    }
    record(`${module.label}: cold first check, worker (start + load types + check)`, workerCold);
    // A worker warmed ahead (TypeScript and its lib loaded before the module is known), as the CLI starts it.
    const warmedCold: Sample[] = [];
    for (let run = 0; run < COLD_RUNS; run++) {
      await warmCheckerPool();
      const worker = createWorkerChecker(module);
      warmedCold.push(await timeAsync(() => worker.check(first)));
      await worker.close();
    }
    record(`${module.label}: cold first check, worker warmed ahead (load the module + check)`, warmedCold);
    const worker = createWorkerChecker(module);
    await worker.check(first);
    const workerWarm: Sample[] = [];
    for (let run = 0; run < WARM_RUNS; run++) {
      const snippet = `${module.snippets[run % module.snippets.length]}\n// worker run ${run}`;
      workerWarm.push(await timeAsync(() => worker.check(snippet)));
    }
    record(`${module.label}: warm re-check of a new snippet, worker`, workerWarm);
    // A new session of the module (its own checker) while the module's worker is warm: no program build.
    const newSession: Sample[] = [];
    for (let run = 0; run < WARM_RUNS / 3; run++) {
      const session = createWorkerChecker(module);
      const snippet = `${module.snippets[run % module.snippets.length]}\n// new session ${run}`;
      newSession.push(await timeAsync(() => session.check(snippet)));
      await session.close();
    }
    record(`${module.label}: a new session's first check of a new snippet, module's worker warm`, newSession);
    await worker.close();

    const appended = appendedChecker(module);
    appended(first);
    const appendedSamples: Sample[] = [];
    for (let run = 0; run < WARM_RUNS / 2; run++) {
      const snippet = `${module.snippets[run % module.snippets.length]}\n// appended ${run}`;
      appendedSamples.push(time(() => appended(snippet)));
    }
    record(`${module.label}: warm re-check, appended strategy (comparison)`, appendedSamples);
  }
  results.push(...(await executeFigures()));
  return results;
}

const LEDGER_PATH = fileURLToPath(new URL("./fixtures/ledger-context.ts", import.meta.url));
const LEDGER_CALLS = `async function main(moss: Moss) {
  const total = moss.ledger.add(1);
  const current = await moss.ledger.total();
  const label = moss.ledger.label("rent");
  return total + current + label.length;
}`;

/** Issue 17's figure: a warm execute whose code is new (so it is type-checked), through MossRuntime, each driver. */
async function executeFigures(): Promise<BenchResult[]> {
  const { MossCompiler } = await import("../engine/compiler/moss-compiler.ts");
  const results: BenchResult[] = [];
  for (const sandbox of ["in-process", "process"] as const) {
    const runtime = await new MossCompiler({ sandbox, typeCheck: "strict" }).compile(LEDGER_PATH);
    const execute = async (code: string): Promise<void> => {
      const execution = await runtime.execute({ code });
      if (!execution.ok) throw new Error(`benchmark snippet failed: ${JSON.stringify(execution.error)}`);
    };
    await execute(LEDGER_CALLS);
    const checked: Sample[] = [];
    for (let run = 0; run < WARM_RUNS / 2; run++) {
      checked.push(await timeAsync(() => execute(`${LEDGER_CALLS}\n// new snippet ${run}`)));
    }
    const unchecked: Sample[] = [];
    for (let run = 0; run < WARM_RUNS / 2; run++) {
      unchecked.push(
        await timeAsync(async () => {
          const execution = await runtime.execute({ code: LEDGER_CALLS, typeCheck: "off" });
          if (!execution.ok) throw new Error("benchmark snippet failed");
        }),
      );
    }
    // New code with the check off: the same transform and script compile as a checked new snippet (the row above
    // reuses its cached transform), so the difference to the checked figure is the check alone.
    const uncheckedNew: Sample[] = [];
    for (let run = 0; run < WARM_RUNS / 2; run++) {
      uncheckedNew.push(
        await timeAsync(async () => {
          const code = `${LEDGER_CALLS}\n// unchecked snippet ${run}`;
          const execution = await runtime.execute({ code, typeCheck: "off" });
          if (!execution.ok) throw new Error("benchmark snippet failed");
        }),
      );
    }
    await runtime.close();
    for (const [name, samples] of [
      [`ledger, execute (${sandbox}): warm execute with strict type-check of a new snippet`, checked],
      [`ledger, execute (${sandbox}): warm execute, type-check off (comparison)`, unchecked],
      [
        `ledger, execute (${sandbox}): warm execute of a new snippet, type-check off (comparison)`,
        uncheckedNew,
      ],
    ] as const) {
      results.push({
        name,
        medianMs: median(samples.map((sample) => sample.wallMs)),
        medianCpuMs: median(samples.map((sample) => sample.cpuMs)),
        samples: samples.length,
      });
    }
  }
  return results;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const results = await run();
  const width = Math.max(...results.map((result) => result.name.length));
  for (const result of results) {
    const wall = result.medianMs.toFixed(1).padStart(8);
    const cpu = result.medianCpuMs.toFixed(1).padStart(8);
    console.log(
      `${result.name.padEnd(width)}  ${wall} ms wall  ${cpu} ms cpu  (median of ${result.samples})`,
    );
  }
}
