// Prints the type-check benchmark of bench/check.bench.ts (issue 4) in the shared table format, with ratios
// against its own baseline: the "appended strategy" (module + snippet in one file) measured in the same run.
import { run as runCheckBench } from "./check.bench.ts";
import { formatMs, formatRatio, printTable } from "./stats.ts";

const BASELINE_SUFFIX = "warm re-check, appended strategy (comparison)";

/** Runs the check benchmark and prints one table per module. */
export async function run(): Promise<void> {
  const results = await runCheckBench();
  const byModule = new Map<
    string,
    Array<{ figure: string; medianMs: number; medianCpuMs?: number; samples: number }>
  >();
  for (const result of results) {
    const separator = result.name.indexOf(": ");
    const module = result.name.slice(0, separator);
    const figure = result.name.slice(separator + 2);
    const rows = byModule.get(module) ?? [];
    rows.push({
      figure,
      medianMs: result.medianMs,
      medianCpuMs: (result as { medianCpuMs?: number }).medianCpuMs,
      samples: result.samples,
    });
    byModule.set(module, rows);
  }
  for (const [module, rows] of byModule) {
    const baseline = rows.find((row) => row.figure === BASELINE_SUFFIX)?.medianMs ?? Number.NaN;
    printTable(
      `check: ${module} (ModuleChecker)`,
      ["figure", "median wall", "median CPU", "samples", "ratio to appended strategy"],
      rows.map((row) => [
        row.figure,
        formatMs(row.medianMs),
        row.medianCpuMs === undefined ? "n/a" : formatMs(row.medianCpuMs),
        String(row.samples),
        formatRatio(row.medianMs, baseline),
      ]),
      ["check.bench.ts reports medians only (no p90)."],
    );
  }
}
