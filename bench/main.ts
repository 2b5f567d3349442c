// Runs the benchmarks in one process (children where a fresh process is needed) and prints their tables.
// Usage: npm run bench [-- --only prompt,runtime,check,scale]
import { closeSharedSandboxes } from "../engine/runtime/shared-sandbox.ts";

type Benchmark = () => Promise<void>;

const BENCHMARKS: Record<string, () => Promise<Benchmark>> = {
  // check first: its "cold first check, fresh process" figure needs TypeScript's lib files not yet parsed here.
  check: async () => (await import("./check-report.ts")).run,
  prompt: async () => (await import("./prompt.bench.ts")).run,
  runtime: async () => (await import("./runtime.bench.ts")).run,
  cli: async () => (await import("./cli.bench.ts")).run,
  apis: async () => (await import("./apis.bench.ts")).run,
  membrane: async () => (await import("./membrane.bench.ts")).run,
  durable: async () => (await import("./durable.bench.ts")).run,
  "module-check": async () => (await import("./module-check.bench.ts")).run,
  serve: async () => (await import("./serve.bench.ts")).run,
  "serve-memory": async () => (await import("./serve-memory.bench.ts")).run,
  "serve-fair": async () => (await import("./serve-fair.bench.ts")).run,
  redaction: async () => (await import("./redaction.bench.ts")).run,
  scale: async () => (await import("./scale.bench.ts")).run,
};

const CHILD_TASKS: Record<string, (args: string[]) => Promise<void>> = {
  prompt: async ([modulePath]) => (await import("./prompt.bench.ts")).measurePromptInChild(modulePath!),
  "runtime-memory": async (args) => (await import("./runtime.bench.ts")).measureIdleMemoryInChild(args),
  "scale-memory": async (args) => (await import("./scale.bench.ts")).measureScaleMemoryInChild(args),
  "serve-stages": async (args) => (await import("./serve-memory.bench.ts")).measureServeStagesInChild(args),
};

/** Runs the selected benchmarks (all by default); returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  if (argv[0] === "--child") {
    const task = CHILD_TASKS[argv[1] ?? ""];
    if (!task) throw new Error(`unknown child task ${argv[1]}`);
    await task(argv.slice(2));
    await closeSharedSandboxes();
    process.exit(0);
  }
  const onlyIndex = argv.indexOf("--only");
  const selected = onlyIndex === -1 ? Object.keys(BENCHMARKS) : (argv[onlyIndex + 1] ?? "").split(",");
  const unknown = selected.filter((name) => !(name in BENCHMARKS));
  if (unknown.length > 0) {
    console.error(
      `unknown benchmark ${unknown.join(", ")}; choose from ${Object.keys(BENCHMARKS).join(", ")}`,
    );
    return 2;
  }
  const os = await import("node:os");
  console.log(
    `# moss-ts benchmarks — Node ${process.version}, ${os.cpus().length} CPUs, load average ${os
      .loadavg()
      .map((load) => load.toFixed(1))
      .join(" ")} (medians; ratios against baselines measured in the same run; no assertions)`,
  );
  const started = performance.now();
  for (const name of selected) {
    const benchmarkStarted = performance.now();
    const benchmark = await BENCHMARKS[name]!();
    await benchmark();
    console.log(`\n(${name}: ${((performance.now() - benchmarkStarted) / 1000).toFixed(1)} s)`);
  }
  await closeSharedSandboxes();
  console.log(`\n# total ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return 0;
}
