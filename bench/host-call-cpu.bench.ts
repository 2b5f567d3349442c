// The isolate's CPU per sync host call, on both drivers: the run's isolate CPU time (SandboxRunResult.cpuTimeMs) with
// 4,000 calls less the same loop without calls, per call. Unlike the round trip's wall time (rows 3a–3c of
// `npm run bench -- --only runtime`), it leaves out the waits for the host and moves little with the machine's load,
// so it shows what the isolate half of a call costs (encode, call site, decode). Spinning is off (spinMicroseconds 0).
// Run: node --no-node-snapshot --import tsx bench/host-call-cpu.bench.ts
import { CALL_SITE_PROBE } from "../engine/membrane/index.ts";
import { InProcessDriver, ProcessDriver } from "../engine/sandbox/index.ts";
import { DEFAULT_LIMITS } from "../engine/types.ts";
import { Ball, TestMembrane } from "../test/sandbox/test-membrane.ts";

const CALLS = 4_000;
const RUNS = 12;

for (const kind of ["in-process", "process"] as const) {
  const driver =
    kind === "process"
      ? new ProcessDriver({ spinMicroseconds: 0 })
      : new InProcessDriver({ spinMicroseconds: 0 });
  const membrane = new TestMembrane();
  const limits = { ...DEFAULT_LIMITS, maxHostCalls: 1_000_000 };
  const session = await driver.open(membrane.setup({ ball: new Ball() }, {}, {}), membrane, limits);
  /** The lower quartile of the runs' isolate CPU time: the runs least disturbed by other work on the machine. */
  const cpuMs = async (term: string): Promise<number> => {
    const times: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const result = await session.run({
        // The probe a compiled snippet starts with (CALL_SITE_PROBE): call sites are then found in the run's script.
        script: `${CALL_SITE_PROBE}(); function main() { let sum = 0; for (let i = 0; i < ${CALLS}; i++) sum += ${term}; return sum; }`,
        filename: "snippet.js",
        target: "main",
        args: [],
        limits,
      });
      if (!result.ok) throw new Error(JSON.stringify(result.error));
      times.push(result.cpuTimeMs);
    }
    return times.sort((a, b) => a - b)[Math.floor(RUNS / 4)]!;
  };
  const none = await cpuMs("i");
  const getter = await cpuMs("ball.label.length");
  const method = await cpuMs("ball.move(1, 1).x");
  const perCall = (ms: number) => `${(((ms - none) * 1000) / CALLS).toFixed(2)} µs`;
  console.log(
    `${kind}: isolate CPU per sync host call: ${perCall(getter)} (a getter, string result), ${perCall(method)} (a method, object result)`,
  );
  await session.dispose();
  await driver.close();
}
