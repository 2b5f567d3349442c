// Durable runs (issue 10): what the run log costs. (1) A warm execute making 3 host calls with runs that can pause
// (the log is kept) against the same runtime settings with `durableRuns: false` (no log kept), interleaved in one
// run. (2) The cost of a resume as a function of the number of logged calls it replays (10, 100, 1000), against a
// plain execute of the same number of calls, with the continuation's size.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MossCompiler } from "../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../engine/runtime/moss-runtime.ts";
import { formatBytes, formatMs, formatRatio, printTable, summarize } from "./stats.ts";

const MODULE = fileURLToPath(new URL("../test/fixtures/durable/context.ts", import.meta.url));
const WARM_RUNS = 60;
const RESUME_RUNS = 15;

async function compile(durableRuns: boolean): Promise<MossRuntime> {
  return new MossCompiler({ sandbox: "in-process", typeCheck: "off", durableRuns }).compile(MODULE);
}

async function timed(action: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await action();
  return performance.now() - started;
}

export async function run(): Promise<void> {
  const recording = await compile(true);
  const plain = await compile(false);
  try {
    const threeCalls = {
      code: `async function main(moss: Moss) { moss.robot.position(); moss.robot.position(); return moss.robot.note("x"); }`,
    };
    for (const runtime of [recording, plain]) for (let i = 0; i < 5; i++) await runtime.execute(threeCalls);
    const withLog: number[] = [];
    const withoutLog: number[] = [];
    for (let i = 0; i < WARM_RUNS; i++) {
      withLog.push(await timed(() => recording.execute(threeCalls)));
      withoutLog.push(await timed(() => plain.execute(threeCalls)));
    }
    const on = summarize(withLog);
    const off = summarize(withoutLog);
    printTable(
      `durable runs: a warm execute with 3 host calls (in-process, type-check off, ${WARM_RUNS} interleaved runs each)`,
      ["runtime", "median", "p90", "ratio to no log"],
      [
        [
          "durableRuns: false (no log kept)",
          formatMs(off.median),
          formatMs(off.p90),
          formatRatio(off.median, off.median),
        ],
        [
          "default (log kept, can pause)",
          formatMs(on.median),
          formatMs(on.p90),
          formatRatio(on.median, off.median),
        ],
      ],
    );

    const rows: string[][] = [];
    for (const calls of [10, 100, 1000]) {
      const reads = `for (let i = 0; i < ${calls - 1}; i++) moss.robot.position();`;
      const pause = async () => {
        const paused = await recording.execute({
          code: `async function main(moss: Moss) { ${reads} return moss.robot.move(1); }`,
        });
        if (!paused.pending) throw new Error(`expected a paused run: ${JSON.stringify(paused.error)}`);
        const { requests, continuation } = paused.pending;
        return { continuation, answers: { [requests[0]!.id]: { approved: true as const } } };
      };
      const executeSame = {
        code: `async function main(moss: Moss) { ${reads} return moss.robot.position(); }`,
      };
      // A continuation resumes once: each measured resume gets a run paused just before (not measured).
      const warm = await pause();
      await recording.resume(warm.continuation, warm.answers);
      await recording.execute(executeSame);
      const resumes: number[] = [];
      const executes: number[] = [];
      let size = 0;
      for (let i = 0; i < RESUME_RUNS; i++) {
        const { continuation, answers } = await pause();
        size = continuation.length;
        resumes.push(await timed(() => recording.resume(continuation, answers)));
        executes.push(await timed(() => recording.execute(executeSame)));
      }
      const resume = summarize(resumes);
      const execute = summarize(executes);
      rows.push([
        String(calls),
        formatMs(resume.median),
        formatMs(execute.median),
        formatRatio(resume.median, execute.median),
        formatBytes(size),
      ]);
    }
    printTable(
      `durable runs: resume cost by logged calls (${RESUME_RUNS} runs each; a resume verifies the continuation, starts a fresh isolate and replays)`,
      [
        "logged calls",
        "resume median",
        "execute median (same calls, no pause)",
        "ratio",
        "continuation size",
      ],
      rows,
      [`module: ${path.relative(process.cwd(), MODULE)}`],
    );
  } finally {
    await recording.close();
    await plain.close();
  }
}
