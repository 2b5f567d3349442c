import { afterAll, afterEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { DEFAULT_LIMITS, type Execution, type ExecutionLimits, MossError } from "../../engine/index.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { InProcessDriver } from "../../engine/sandbox/in-process-driver.ts";
import { ProcessDriver } from "../../engine/sandbox/process-driver.ts";
import type { SandboxDriver } from "../../engine/sandbox/sandbox.ts";
import { Vault } from "../fixtures/security/vault.ts";
import { TestMembrane } from "../sandbox/test-membrane.ts";
import { SECURITY_MODULE } from "../security/security-harness.ts";

/*
 * Issue 24 §4: each run's limits hold on a warm session. An isolate's memory limit is fixed when it is made; a
 * session opened under the default 128 MiB and reused as it is let a run that asked for 16 MiB allocate 64 MiB.
 * Every limit a request sets must hold for that run, whatever the session ran before, on both drivers.
 */

const MEBIBYTE = 1024 * 1024;

/** Runs `main` so it holds about 64 MiB of heap at once (eight arrays of 2^20 doubles). */
const ALLOCATE_64_MIB = `function main() {
  const kept = [];
  for (let i = 0; i < 8; i++) kept.push(new Array(1 << 20).fill(i + 0.5));
  return kept.length;
}`;

function expectKind(execution: Execution, kind: string): void {
  expect(execution.error?.kind, JSON.stringify(execution.error)).toBe(kind);
  expect(execution.ok).toBe(false);
}

describe.each([
  ["process", () => new ProcessDriver({ poolSize: 1 })],
  ["in-process", () => new InProcessDriver()],
] as const)("per-run limits on a warm session (%s driver)", (_name, createDriver) => {
  const driver: SandboxDriver = createDriver();
  const runtimes: MossRuntime[] = [];

  async function compile(limits: Partial<ExecutionLimits> = {}): Promise<MossRuntime> {
    const runtime = await new MossCompiler({ sandbox: driver, limits })
      .bind(Vault, new Vault())
      .compile(SECURITY_MODULE);
    runtimes.push(runtime);
    return runtime;
  }

  /** A runtime whose session is warm: opened under the runtime's (default) limits, with data written. */
  async function warm(): Promise<MossRuntime> {
    const runtime = await compile();
    const first = await runtime.execute({
      code: "function main(moss) { moss.counter = 41; moss.notes.push('kept'); return 1; }",
      typeCheck: "off",
    });
    expect(first.error).toBeUndefined();
    return runtime;
  }

  afterEach(async () => {
    await Promise.all(runtimes.splice(0).map((runtime) => runtime.close()));
  });
  afterAll(async () => {
    await driver.close();
  });

  test("a run's memory limit below the session's holds: allocating past it fails with kind memory", async () => {
    const runtime = await warm();
    // The warm session's own limit (128 MiB) lets this allocation through.
    const roomy = await runtime.execute({ code: ALLOCATE_64_MIB, typeCheck: "off" });
    expect(roomy.error).toBeUndefined();
    expect(roomy.returns).toBe(8);

    const tight = await runtime.execute({
      code: ALLOCATE_64_MIB,
      typeCheck: "off",
      limits: { memoryLimitBytes: 16 * MEBIBYTE },
    });
    expectKind(tight, "memory");
    expect(tight.error?.message).toContain("16 MiB");

    // The session's data came through the rebuild; a small run under the small limit works.
    const small = await runtime.execute({
      code: "function main(moss) { return [moss.counter, moss.notes.length, new Array(1000).fill(1).length]; }",
      typeCheck: "off",
      limits: { memoryLimitBytes: 16 * MEBIBYTE },
    });
    expect(small.error).toBeUndefined();
    expect(small.returns).toEqual([41, 1, 1000]);

    // A later run under the runtime's limit has it again.
    const again = await runtime.execute({ code: ALLOCATE_64_MIB, typeCheck: "off" });
    expect(again.error).toBeUndefined();
    expect(again.returns).toBe(8);
  });

  test("a run's memory limit above the session's holds too", async () => {
    const runtime = await compile({ memoryLimitBytes: 16 * MEBIBYTE });
    // The session is warm under its runtime's 16 MiB.
    const small = await runtime.execute({ code: "function main() { return 1; }", typeCheck: "off" });
    expect(small.error).toBeUndefined();
    const roomy = await runtime.execute({
      code: ALLOCATE_64_MIB,
      typeCheck: "off",
      limits: { memoryLimitBytes: 128 * MEBIBYTE },
    });
    expect(roomy.error).toBeUndefined();
    expect(roomy.returns).toBe(8);
    const tight = await runtime.execute({ code: ALLOCATE_64_MIB, typeCheck: "off" });
    expectKind(tight, "memory");
  });

  test("wall time, CPU time, stdout, host calls and result size each hold for the run on a warm session", async () => {
    const runtime = await warm();
    const spin = "function main() { const end = Date.now() + 5000; while (Date.now() < end) {} return 1; }";
    const wall = await runtime.execute({
      code: spin,
      typeCheck: "off",
      limits: { wallTimeMs: 300, cpuTimeMs: 30_000 },
    });
    expectKind(wall, "timeout");
    expect(wall.error?.message).toContain("300 ms");

    const cpu = await runtime.execute({
      code: spin,
      typeCheck: "off",
      limits: { wallTimeMs: 30_000, cpuTimeMs: 300 },
    });
    expectKind(cpu, "timeout");
    expect(cpu.error?.message).toContain("300 ms");

    const stdout = await runtime.execute({
      code: "function main() { for (let i = 0; i < 100; i++) console.log('x'.repeat(50)); return 1; }",
      typeCheck: "off",
      limits: { maxStdoutBytes: 200 },
    });
    expectKind(stdout, "output-limit");
    expect(stdout.stdout.length).toBeLessThan(400);

    const calls = await runtime.execute({
      code: "function main(moss) { for (let i = 0; i < 20; i++) moss.vault.read('k'); return 1; }",
      typeCheck: "off",
      limits: { maxHostCalls: 5 },
    });
    expectKind(calls, "call-limit");

    const result = await runtime.execute({
      code: "function main() { return 'y'.repeat(10_000); }",
      typeCheck: "off",
      limits: { maxResultBytes: 1_000 },
    });
    expectKind(result, "output-limit");

    // None of them changed the session's own limits: the next run without limits has them all back.
    const after = await runtime.execute({
      code: "function main(moss) { for (let i = 0; i < 20; i++) moss.vault.read('k'); console.log('z'.repeat(500)); return [moss.counter, 'y'.repeat(10_000).length]; }",
      typeCheck: "off",
    });
    expect(after.error).toBeUndefined();
    expect(after.returns).toEqual([41, 10_000]);
  });

  test("a session opened with a fixed setup refuses a run under another memory limit, naming it", async () => {
    const membrane = new TestMembrane();
    const limits: ExecutionLimits = { ...DEFAULT_LIMITS, memoryLimitBytes: 128 * MEBIBYTE };
    const session = await driver.open(membrane.setup({}, { count: 0 }, {}), membrane, limits);
    try {
      const refused = session.run({
        script: "function main() { return 1; }",
        filename: "snippet.js",
        target: "main",
        args: [],
        limits: { ...limits, memoryLimitBytes: 16 * MEBIBYTE },
      });
      await expect(refused).rejects.toThrow(MossError);
      await expect(refused).rejects.toThrow(/16 MiB/);
    } finally {
      await session.dispose();
    }
  });
});
