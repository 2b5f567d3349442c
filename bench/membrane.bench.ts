// Membrane benchmark (issue 8, class 5): the host-side cost of one membrane call — decoding arguments, calling,
// typing the result by its declared type and encoding it — for a number, a declared handle and an array of three
// declared handles. No isolate: this is what the declared-type resolution adds to every host call.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { analyzeModule } from "../engine/module/module-analysis.ts";
import { moduleProject } from "../engine/module/module-project.ts";
import { DeclaredTypes } from "../engine/runtime/declared-members.ts";
import { HandleMembrane } from "../engine/runtime/host-membrane.ts";
import { Journal } from "./fixtures/membrane-service.ts";
import { formatMs, formatRatio, printTable, summarize } from "./stats.ts";

const MODULE = fileURLToPath(new URL("./fixtures/membrane-context.ts", import.meta.url));
const CALLS = 2_000;
const ROUNDS = 30;

export async function run(): Promise<void> {
  const source = readFileSync(MODULE, "utf8");
  const analysis = analyzeModule(moduleProject(source), MODULE, source);
  const declared = new DeclaredTypes(analysis.declaredTypes.program);
  const journalType = declared.of(analysis.declaredTypes.fields.get("journal")!);
  // A fresh membrane per round, so handle tables do not grow across rounds.
  const open = () => {
    const membrane = new HandleMembrane({ nearestDeclaredClass: () => undefined });
    const wire = membrane.encode(
      { journal: new Journal() },
      "moss",
      declared.record(new Map([["journal", journalType]])),
    );
    const handle = (JSON.parse(wire) as unknown[]).find((node) => Array.isArray(node) && node[0] === "H") as [
      string,
      { id: number },
    ];
    return { membrane, id: handle[1].id };
  };
  const noArguments = JSON.stringify([["A"]]);
  const oneArgument = JSON.stringify([["A", 1], 1]);
  const cases: Array<[string, (membrane: HandleMembrane, id: number) => unknown]> = [
    ["returns a number", (membrane, id) => membrane.call(id, "add", oneArgument)],
    ["returns a declared handle", (membrane, id) => membrane.call(id, "entry", noArguments)],
    ["returns an array of 3 declared handles", (membrane, id) => membrane.call(id, "entries", noArguments)],
  ];
  const rows: string[][] = [];
  let baseline = Number.NaN;
  for (const [name, call] of cases) {
    const perCall: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const { membrane, id } = open();
      call(membrane, id);
      const started = performance.now();
      for (let index = 0; index < CALLS; index++) call(membrane, id);
      perCall.push((performance.now() - started) / CALLS);
    }
    const summary = summarize(perCall.slice(3));
    if (Number.isNaN(baseline)) baseline = summary.median;
    rows.push([name, formatMs(summary.median), formatMs(summary.p90), formatRatio(summary.median, baseline)]);
  }
  printTable(
    `membrane: host-side cost of one call (${CALLS} calls × ${ROUNDS} rounds, medians; ${path.basename(MODULE)})`,
    ["call", "median", "p90", "ratio to a number result"],
    rows,
  );
}
