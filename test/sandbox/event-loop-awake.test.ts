import { readFileSync } from "node:fs";
import { setTimeout as sleep, setImmediate as turn } from "node:timers/promises";
import { afterAll, describe, expect, test } from "vitest";
import { decodeWire } from "../../engine/membrane/host/host-wire.ts";
import {
  EventLoopAwake,
  eventLoopAwake,
  MAX_SPIN_MICROSECONDS,
  spinMicrosecondsOf,
} from "../../engine/sandbox/event-loop-awake.ts";
import { InProcessDriver } from "../../engine/sandbox/in-process-driver.ts";
import { ProcessDriver } from "../../engine/sandbox/process-driver.ts";
import type { SandboxDriver } from "../../engine/sandbox/sandbox.ts";
import { DEFAULT_LIMITS } from "../../engine/types.ts";
import { Ball, TestMembrane } from "./test-membrane.ts";

/*
 * Issue 17, bounded spinning: a side of the membrane that expects a reply polls for it for a bounded window instead of
 * sleeping, and stops once nothing crosses: no CPU is spent with no execute in flight.
 */

/** CPU time (user + system, in clock ticks of 10 ms) a process has used, from `/proc/<pid>/stat`. */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

describe("EventLoopAwake", () => {
  test("keeps the loop polling for its window after the last awake, then stops", async () => {
    const loop = new EventLoopAwake(() => true);
    loop.awake(3_000);
    expect(loop.spinning).toBe(true);
    await new Promise((resolve) => setImmediate(resolve));
    expect(loop.turns).toBeGreaterThan(0);
    // The loop stops at its first turn past the window. A process descheduled across the whole window wakes to the
    // timer first (libuv runs timers before immediates), so one more turn is let run before looking.
    await sleep(30);
    await turn();
    expect(loop.spinning).toBe(false);
    const turns = loop.turns;
    await sleep(30);
    expect(loop.turns).toBe(turns);
  });

  test("does not poll when polling cannot pay (no free core) or for a window of 0", () => {
    const busy = new EventLoopAwake(() => false);
    busy.awake(3_000);
    expect(busy.spinning).toBe(false);
    const off = new EventLoopAwake(() => true);
    off.awake(0);
    expect(off.spinning).toBe(false);
  });

  test("stops polling as soon as the machine has no free core", async () => {
    let free = true;
    const loop = new EventLoopAwake(() => free);
    loop.awake(MAX_SPIN_MICROSECONDS);
    free = false;
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(loop.spinning).toBe(false);
  });

  test("a spin option outside 0 to 5000 µs is refused by name", () => {
    expect(spinMicrosecondsOf(undefined, "spinMicroseconds")).toBeGreaterThan(0);
    expect(spinMicrosecondsOf(0, "spinMicroseconds")).toBe(0);
    for (const bad of [-1, Number.NaN, MAX_SPIN_MICROSECONDS + 1, Number.POSITIVE_INFINITY]) {
      expect(() => spinMicrosecondsOf(bad, "spinMicroseconds")).toThrow(
        expect.objectContaining({
          code: "invalid-argument",
          message: expect.stringMatching(/^spinMicroseconds /),
        }),
      );
    }
    expect(() => new ProcessDriver({ spinMicroseconds: -5 })).toThrow(/spinMicroseconds must be/);
    expect(() => new InProcessDriver({ spinMicroseconds: 10_000 })).toThrow(/spinMicroseconds must be/);
  });
});

describe.each(["process", "in-process"] as const)("%s driver: no CPU burnt once the run is over", (kind) => {
  const drivers: SandboxDriver[] = [];
  afterAll(async () => {
    await Promise.all(drivers.map((driver) => driver.close()));
  });

  test("after a run of many host calls with the longest spin, the loops stop and the sandbox process sleeps", async () => {
    const driver =
      kind === "process"
        ? new ProcessDriver({ poolSize: 1, spinMicroseconds: MAX_SPIN_MICROSECONDS })
        : new InProcessDriver({ spinMicroseconds: MAX_SPIN_MICROSECONDS });
    drivers.push(driver);
    const membrane = new TestMembrane();
    const limits = { ...DEFAULT_LIMITS, wallTimeMs: 10_000, cpuTimeMs: 10_000 };
    const session = await driver.open(membrane.setup({ ball: new Ball() }, {}, {}), membrane, limits);
    const result = await session.run({
      script:
        "function main() { let sum = 0; for (let i = 0; i < 500; i++) sum += ball.label.length; return sum; }",
      filename: "snippet.js",
      target: "main",
      args: [],
      limits,
    });
    expect(result.ok).toBe(true);
    expect(decodeWire(result.returns!)).toBe(2_000);
    expect(result.hostCalls).toBe(500);

    // The pool refills the spare the session took (REFILL_DELAY_MS after the open): its start costs a few hundred ms
    // of CPU on a busy machine. Measured once it is ready, as every process here must then only sleep.
    if (driver instanceof ProcessDriver) await driver.start();
    // Longer than the window, and a turn of the loop past it: every loop that was polling has stopped.
    await sleep(50);
    await turn();
    expect(eventLoopAwake.spinning).toBe(false);
    const turns = eventLoopAwake.turns;
    const pids = driver instanceof ProcessDriver ? driver.pids : [];
    const before = pids.map(cpuTicks);
    await sleep(500);
    expect(eventLoopAwake.turns).toBe(turns);
    // A polling process would use all 50 ticks of the half second; a sleeping one none (one allowed for its timers).
    expect(pids.map((pid, index) => cpuTicks(pid) - before[index]!).filter((ticks) => ticks > 1)).toEqual([]);
    await session.dispose();
  });
});
