// Module check benchmark (issue 16 point 3): what type-checking the context module adds to compile(). The check
// reuses the analysis program; its cost is checking every body (the module and the author's files it imports) with
// the fresh checker of each compile, and it is skipped for unchanged files found clean before in the process.
import { readFileSync } from "node:fs";
import path from "node:path";
import { analyzeModule } from "../engine/module/module-analysis.ts";
import { moduleProject } from "../engine/module/module-project.ts";
import { moduleTypeErrors, readCheckedModule } from "../engine/module/module-type-check.ts";
import { formatMs, formatRatio, printTable, sample } from "./stats.ts";

const MODULES = ["examples/sphero/context.ts", "examples/todo/context.ts"];
const RUNS = 20;

/** Prints, per example module: analysis alone, analysis + check of a changed module, and of an unchanged one. */
export async function run(): Promise<void> {
  const rows: string[][] = [];
  for (const modulePath of MODULES) {
    const absolute = path.resolve(modulePath);
    const source = readFileSync(absolute, "utf8");
    // A changed text each run (a trailing comment) defeats the clean-module cache, as an edited module would.
    const changed = (run: number) => `${source}\n// run ${run}\n`;
    const analysis = await sample(RUNS, (run) =>
      analyzeModule(moduleProject(source), absolute, changed(run)),
    );
    const checked = await sample(RUNS, (run) => {
      const analysed = analyzeModule(moduleProject(source), absolute, changed(run));
      moduleTypeErrors(analysed.sourceFile, modulePath);
    });
    const edited = await sample(RUNS, (run) => readCheckedModule(absolute, changed(run + RUNS), modulePath));
    const unchanged = await sample(RUNS, () => readCheckedModule(absolute, source, modulePath));
    rows.push([
      modulePath,
      formatMs(analysis.median),
      formatMs(checked.median),
      formatRatio(checked.median, analysis.median),
      formatMs(edited.median),
      formatMs(unchanged.median),
    ]);
  }
  printTable(
    "Module check: compile's analysis with and without the type check (warm process)",
    ["module", "analysis", "analysis + check", "ratio", "edited module", "unchanged"],
    rows,
    [
      `medians of ${RUNS} runs after warm-up; "analysis + check": a changed module each run, every file checked`,
      '"edited module": compile\'s path for a changed module (the files it imports found clean before are not re-checked)',
      '"unchanged": compile\'s path for a module and files found clean before (only the analysis)',
      "the first compile of a process also pays the checker's first pass over lib types (see runtime 2b)",
    ],
  );
}
