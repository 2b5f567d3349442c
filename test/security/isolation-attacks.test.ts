import { afterAll, afterEach, beforeEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { InProcessDriver } from "../../engine/sandbox/in-process-driver.ts";
import { ProcessDriver } from "../../engine/sandbox/process-driver.ts";
import type { SandboxDriver } from "../../engine/sandbox/sandbox.ts";
import type { Execution, ExecutionLimits } from "../../engine/types.ts";
import { Vault } from "../fixtures/security/vault.ts";
import { SECURITY_MODULE } from "./security-harness.ts";

/*
 * Attacks on the isolation between runs (issue 8, class 4: one runtime's code ends, crashes or delays another's;
 * class 6: work outlives its run) and on the error kinds that name a run's cause. Every attack runs through the
 * real MossRuntime. The process driver is given one spare process, the smallest pool, so runtimes would share a
 * process if sessions ever did.
 */

const LIMITS: ExecutionLimits = {
  wallTimeMs: 3_000,
  cpuTimeMs: 3_000,
  memoryLimitBytes: 64 * 1024 * 1024,
  maxStdoutBytes: 4_096,
  maxHostCalls: 10_000,
  maxResultBytes: 64 * 1024,
};

const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** Host locals the attacks use: a gate the test opens, and slow sync and async host functions. */
function hostLocals(gate: Promise<void>) {
  return {
    gate: () => gate,
    quick: () => 1,
    slowSync: (ms: number) => {
      sleepSync(ms);
      return ms;
    },
    slowAsync: (ms: number) => new Promise<number>((resolve) => setTimeout(() => resolve(ms), ms)),
  };
}

function expectKind(execution: Execution, kind: string): void {
  expect(execution.error?.kind, JSON.stringify(execution.error)).toBe(kind);
  expect(execution.ok).toBe(false);
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const rejections: unknown[] = [];
const onRejection = (reason: unknown) => rejections.push(reason);
beforeEach(() => {
  rejections.length = 0;
  process.on("unhandledRejection", onRejection);
});
afterEach(() => {
  process.off("unhandledRejection", onRejection);
});

describe.each([
  ["process", () => new ProcessDriver({ poolSize: 1 })],
  ["in-process", () => new InProcessDriver()],
] as const)("isolation attacks (%s driver)", (name, createDriver) => {
  const driver: SandboxDriver = createDriver();
  const runtimes: MossRuntime[] = [];
  let openGate!: () => void;

  async function compile(limits: Partial<ExecutionLimits> = {}): Promise<MossRuntime> {
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    const runtime = await new MossCompiler({ sandbox: driver, limits: { ...LIMITS, ...limits } })
      .bind(Vault, new Vault())
      .withLocals(hostLocals(gate))
      .compile(SECURITY_MODULE);
    runtimes.push(runtime);
    return runtime;
  }

  const run = (runtime: MossRuntime, code: string, limits: Partial<ExecutionLimits> = {}) =>
    runtime.execute({ code, typeCheck: "off", limits: { ...LIMITS, ...limits } });

  afterEach(async () => {
    await Promise.all(runtimes.splice(0).map((runtime) => runtime.close()));
  });
  afterAll(async () => {
    await driver.close();
  });

  describe("class 4: no run ends, crashes or delays another runtime's run", () => {
    test("a CPU-bound run inside its limits does not delay another runtime's short run", async () => {
      const hog = await compile();
      const short = await compile();
      // Both sessions exist before the hog starts, so they could only collide if they shared a process.
      await Promise.all([
        run(hog, "function main() { return 0; }"),
        run(short, "function main() { return 0; }"),
      ]);
      let hogDone = false;
      const hogging = run(
        hog,
        "function main() { const end = Date.now() + 4000; let n = 0; while (Date.now() < end) n++; return n > 0; }",
        { wallTimeMs: 10_000, cpuTimeMs: 10_000 },
      ).finally(() => {
        hogDone = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Not delayed: it finishes while the hog still spins, well inside its own wall limit.
      const quick = await run(short, "function main(moss) { return moss.counter + 1; }", {
        wallTimeMs: 1_500,
      });
      expect(quick.error).toBeUndefined();
      expect(quick.returns).toBe(1);
      expect(hogDone).toBe(false);
      const hogged = await hogging;
      expect(hogged.error).toBeUndefined();
      expect(hogged.returns).toBe(true);
    });

    test.runIf(name === "process")(
      "a V8 abort in one runtime fails only its own run; another runtime's run in flight completes",
      async () => {
        const victim = await compile({ wallTimeMs: 60_000, cpuTimeMs: 60_000 });
        const bystander = await compile();
        await run(victim, "function main(moss) { moss.counter = 7; return 0; }");
        const waiting = run(bystander, "async function main(moss) { await gate(); return 'survived'; }", {
          wallTimeMs: 60_000,
        });
        const aborted = await run(victim, "function main() { return new Array(1e9).fill(0).length; }", {
          wallTimeMs: 60_000,
          cpuTimeMs: 60_000,
        });
        expectKind(aborted, "memory");
        openGate();
        const survived = await waiting;
        expect(survived.error).toBeUndefined();
        expect(survived.returns).toBe("survived");
        // The victim's runtime rebuilds from its persisted context on its next execute.
        const rebuilt = await run(victim, "function main(moss) { return moss.counter; }");
        expect(rebuilt.error).toBeUndefined();
        expect(rebuilt.returns).toBe(7);
      },
    );

    test.runIf(name === "process")(
      "a run killed for time takes down only its own sandbox process, never another runtime's",
      async () => {
        const looper = await compile();
        const other = await compile();
        await run(looper, "function main() { return 0; }");
        await run(other, "var kept = 41; function main() { return kept + 1; }");
        const looped = await run(looper, "function main() { for (;;) {} }", {
          wallTimeMs: 400,
          cpuTimeMs: 400,
        });
        expectKind(looped, "timeout");
        const after = await run(other, "function main() { return kept + 1; }");
        expect(after.error).toBeUndefined();
        expect(after.returns).toBe(42);
      },
    );

    test.runIf(name === "process")("close() ends the sandbox process the runtime held", async () => {
      const processDriver = driver as ProcessDriver;
      const before = new Set(processDriver.pids);
      const runtime = await compile();
      expect((await run(runtime, "function main() { return 1; }")).returns).toBe(1);
      const owned = processDriver.pids.filter(
        (pid) => before.has(pid) && !processDriver.sparePids.includes(pid),
      );
      expect(owned).toHaveLength(1);
      await runtime.close();
      expect(isRunning(owned[0]!)).toBe(false);
    });
  });

  describe("error kinds name the cause", () => {
    test("a builtin that ignores interrupts, killed for time, is timeout (not crash)", async () => {
      const runtime = await compile({ memoryLimitBytes: 512 * 1024 * 1024 });
      const result = await run(runtime, "function main() { return Array.from({ length: 1e8 }).length; }", {
        memoryLimitBytes: 512 * 1024 * 1024,
        wallTimeMs: 600,
        cpuTimeMs: 600,
      });
      expectKind(result, "timeout");
      const next = await run(runtime, "function main(moss) { return moss.counter; }");
      expect(next.error).toBeUndefined();
    });

    test("a detached rejected promise is a runtime error, never a crash or a host unhandled rejection", async () => {
      const runtime = await compile();
      const result = await run(
        runtime,
        'function main() { Promise.reject(new Error("detached")); return 1; }',
      );
      expectKind(result, "runtime");
      expect(result.error?.message).toMatch(/detached/);
      const asyncResult = await run(
        runtime,
        'async function fail() { throw new Error("not awaited"); }\nasync function main() { fail(); await slowAsync(5); return 2; }',
      );
      expectKind(asyncResult, "runtime");
      expect(asyncResult.error?.message).toMatch(/not awaited/);
      const healthy = await run(runtime, "function main() { return 3; }");
      expect(healthy.returns).toBe(3);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(rejections).toEqual([]);
    });

    test("a loop of quick host calls with a low call limit ends with call-limit, not timeout", async () => {
      const runtime = await compile();
      const result = await run(runtime, "function main() { for (;;) quick(); }", {
        maxHostCalls: 2_000,
        cpuTimeMs: 2_000,
        wallTimeMs: 20_000,
      });
      expectKind(result, "call-limit");
      const awaited = await run(runtime, "async function main() { for (;;) await slowAsync(0); }", {
        maxHostCalls: 100,
        cpuTimeMs: 2_000,
        wallTimeMs: 20_000,
      });
      expectKind(awaited, "call-limit");
    });

    test("time spent waiting for slow host methods (sync and async) is not CPU time", async () => {
      const runtime = await compile();
      const limits = { cpuTimeMs: 150, wallTimeMs: 20_000 };
      const sync = await run(
        runtime,
        "function main() { let t = 0; for (let i = 0; i < 4; i++) t += slowSync(100); return t; }",
        limits,
      );
      expect(sync.error).toBeUndefined();
      expect(sync.returns).toBe(400);
      const awaited = await run(
        runtime,
        "async function main() { let t = 0; for (let i = 0; i < 4; i++) t += await slowAsync(100); return t; }",
        limits,
      );
      expect(awaited.error).toBeUndefined();
      expect(awaited.returns).toBe(400);
      const spin = await run(runtime, "function main() { for (;;) {} }", limits);
      expectKind(spin, "timeout");
      expect(spin.error?.message).toMatch(/CPU/);
    });
  });

  describe("class 6: nothing model code schedules runs after its run is over", () => {
    test("no finalizers, weak references or Atomics: nothing to be called back later", async () => {
      const runtime = await compile();
      const result = await run(
        runtime,
        "function main() { return [typeof FinalizationRegistry, typeof WeakRef, typeof Atomics, typeof SharedArrayBuffer, typeof WebAssembly]; }",
      );
      expect(result.returns).toEqual(["undefined", "undefined", "undefined", "undefined", "undefined"]);
    });

    test("a microtask loop queued as the run ends is charged to that run and ends it with timeout", async () => {
      const runtime = await compile();
      const result = await run(
        runtime,
        // After a host promise, ten ticks deep: the loop starts after the run's completion was reported.
        "async function main(moss) { await slowAsync(1); let p = Promise.resolve(); for (let i = 0; i < 10; i++) p = p.then(() => {}); p.then(() => { for (;;) {} }); moss.counter = 5; return 1; }",
        { wallTimeMs: 500, cpuTimeMs: 500 },
      );
      expectKind(result, "timeout");
      const next = await run(runtime, "function main() { return 2; }", { wallTimeMs: 1_000 });
      expect(next.error).toBeUndefined();
      expect(next.returns).toBe(2);
    });

    test("a host promise settling after its run ended runs no model code", async () => {
      const runtime = await compile();
      const first = await run(
        runtime,
        "function main(moss) { slowAsync(30).then(() => { moss.counter = 99; for (;;) {} }); return 1; }",
      );
      expect(first.error).toBeUndefined();
      await new Promise((resolve) => setTimeout(resolve, 150));
      const next = await run(runtime, "function main(moss) { return moss.counter; }", { wallTimeMs: 1_000 });
      expect(next.error).toBeUndefined();
      expect(next.returns).toBe(0);
      expect(rejections).toEqual([]);
    });

    test("a rejection of a late host promise reaches neither the next run nor the host", async () => {
      const runtime = await compile();
      const first = await run(
        runtime,
        'function main() { slowAsync(20).then(() => { throw new Error("late"); }); return 1; }',
      );
      expect(first.error).toBeUndefined();
      await new Promise((resolve) => setTimeout(resolve, 100));
      const next = await run(runtime, "function main() { return 2; }");
      expect(next.error).toBeUndefined();
      expect(rejections).toEqual([]);
    });
  });

  describe("buffers cannot commit memory outside the isolate's limit (with or without --no-harmony-rab-gsab)", () => {
    test("ArrayBuffer ignores maxByteLength; nothing resizes or transfers a buffer", async () => {
      const runtime = await compile();
      const result = await run(
        runtime,
        `function main() {
          const buffer = new ArrayBuffer(8, { maxByteLength: 2 ** 31 });
          class Sub extends ArrayBuffer { constructor() { super(8, { maxByteLength: 2 ** 31 }); } }
          const sub = new Sub();
          const viaConstructor = new (new Uint8Array(4).buffer.constructor)(8, { maxByteLength: 2 ** 31 });
          const sliced = buffer.slice(0, 4);
          return {
            resizable: [buffer.resizable === true, sub.resizable === true, viaConstructor.resizable === true, sliced.resizable === true],
            maxByteLength: [buffer.maxByteLength ?? 8, sub.maxByteLength ?? 8, viaConstructor.maxByteLength ?? 8],
            methods: [typeof buffer.resize, typeof buffer.transfer, typeof buffer.transferToFixedLength],
            instance: buffer instanceof ArrayBuffer && sub instanceof ArrayBuffer,
          };
        }`,
      );
      expect(result.error).toBeUndefined();
      expect(result.returns).toEqual({
        resizable: [false, false, false, false],
        maxByteLength: [8, 8, 8],
        methods: ["undefined", "undefined", "undefined"],
        instance: true,
      });
    });
  });
});
