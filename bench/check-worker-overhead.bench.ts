// Where a warm check in the type-check worker spends its time: the host's round trip (post the snippet, receive the
// diagnostics) against the worker's own busy time (its event loop's active time: the check, its garbage collection on
// that thread and the message handling), next to the same checks in this thread. The difference of the first two is
// the host↔worker overhead (messages, wake-ups); the worker figure against the in-thread one is "the same check,
// slower in the worker". Uses the real worker entry and resource limits (startCheckWorker), per young-generation size.
// The worker's heap limit (MOSS_BENCH_CHECK_MEMORY_MB, default moss-ts's 512 MiB) also sets how fast V8 lets its old
// generation grow: at 2048 MiB a mark-compact runs less than half as often (3 instead of 7 over these checks, add
// --trace-gc to count them): 7-24% less CPU per check in three pairs of runs at load 9-12.
// Run: node --no-node-snapshot --import tsx bench/check-worker-overhead.bench.ts
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { CheckWorkerReply, CheckWorkerRequest } from "../engine/check/check-worker.ts";
import {
  checkWorkerEntry,
  DEFAULT_TYPE_CHECK_MEMORY_BYTES,
  startCheckWorker,
} from "../engine/check/check-worker-start.ts";
import { ModuleChecker } from "../engine/check/index.ts";

const LEDGER_PATH = fileURLToPath(new URL("./fixtures/ledger-context.ts", import.meta.url));
const OPTIONS = {
  modulePath: LEDGER_PATH,
  source: readFileSync(LEDGER_PATH, "utf8"),
  hiddenNames: ["MossCompiler", "__moss_compile__"],
};
const LEDGER_CALLS = `async function main(moss: Moss) {
  const total = moss.ledger.add(1);
  const current = await moss.ledger.total();
  const label = moss.ledger.label("rent");
  return total + current + label.length;
}`;
const WORKER_MEMORY_BYTES =
  Number(process.env.MOSS_BENCH_CHECK_MEMORY_MB ?? 0) * 1024 * 1024 || DEFAULT_TYPE_CHECK_MEMORY_BYTES;
const WARM_UP = 50;
const MEASURED = 300;

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[values.length >> 1]!;
const mean = (values: number[]): number => values.reduce((sum, value) => sum + value, 0) / values.length;

function inThread(): string {
  const checker = new ModuleChecker(OPTIONS);
  for (let index = 0; index < WARM_UP; index++) checker.check(`${LEDGER_CALLS}\n// warm ${index}`);
  const walls: number[] = [];
  const cpu = process.cpuUsage();
  for (let index = 0; index < MEASURED; index++) {
    const start = performance.now();
    checker.check(`${LEDGER_CALLS}\n// measured ${index}`);
    walls.push(performance.now() - start);
  }
  const used = process.cpuUsage(cpu);
  checker.dispose();
  return `check median ${median(walls).toFixed(2)} ms, mean ${mean(walls).toFixed(2)} ms; process CPU ${((used.user + used.system) / 1000 / MEASURED).toFixed(2)} ms each`;
}

async function inWorker(): Promise<string> {
  const worker = startCheckWorker(
    await checkWorkerEntry(),
    { options: OPTIONS, accepted: [] },
    WORKER_MEMORY_BYTES,
  );
  await new Promise<void>((resolve, reject) => {
    worker.on("message", (reply: CheckWorkerReply) => reply.type === "ready" && resolve());
    worker.once("error", reject);
  });
  let nextId = 1;
  const check = (snippet: string): Promise<void> =>
    new Promise((resolve) => {
      const id = nextId++;
      const onMessage = (reply: CheckWorkerReply): void => {
        if (reply.type !== "checked" || reply.id !== id) return;
        worker.off("message", onMessage);
        resolve();
      };
      worker.on("message", onMessage);
      worker.postMessage({ type: "check", id, owner: "bench", snippet } satisfies CheckWorkerRequest);
    });
  for (let index = 0; index < WARM_UP; index++) await check(`${LEDGER_CALLS}\n// warm ${index}`);
  const roundTrips: number[] = [];
  const busy: number[] = [];
  const cpu = process.cpuUsage();
  for (let index = 0; index < MEASURED; index++) {
    const before = worker.performance.eventLoopUtilization();
    const start = performance.now();
    await check(`${LEDGER_CALLS}\n// measured ${index}`);
    roundTrips.push(performance.now() - start);
    busy.push(worker.performance.eventLoopUtilization(before).active);
  }
  const used = process.cpuUsage(cpu);
  await worker.terminate();
  return (
    `round trip median ${median(roundTrips).toFixed(2)} ms, mean ${mean(roundTrips).toFixed(2)} ms; ` +
    `worker busy median ${median(busy).toFixed(2)} ms, mean ${mean(busy).toFixed(2)} ms; ` +
    `overhead (round trip - busy) median ${median(roundTrips.map((trip, index) => trip - busy[index]!)).toFixed(2)} ms; ` +
    `process CPU ${((used.user + used.system) / 1000 / MEASURED).toFixed(2)} ms each (both threads)`
  );
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  console.log(`ledger, ${MEASURED} warm checks of a new snippet`);
  console.log(`  this thread: ${inThread()}`);
  console.log(`  worker:      ${await inWorker()}`);
}
