import { afterAll, afterEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { decodeProperties } from "../../engine/context/index.ts";
import { MossError } from "../../engine/errors.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { InProcessDriver } from "../../engine/sandbox/in-process-driver.ts";
import { ProcessDriver } from "../../engine/sandbox/process-driver.ts";
import type { SandboxDriver } from "../../engine/sandbox/sandbox.ts";
import type { Execution, ExecutionLimits } from "../../engine/types.ts";
import { Vault } from "../fixtures/security/vault.ts";
import { expectOk } from "../helpers/expect-ok.ts";
import { SECURITY_MODULE } from "../security/security-harness.ts";

/*
 * Sessions are data; sandbox processes and isolates are a shared, bounded pool (issue 17). Every test runs real
 * runtimes on a real driver whose bounds are small enough that sessions must share, and be evicted.
 */

const LIMITS: ExecutionLimits = {
  wallTimeMs: 3_000,
  cpuTimeMs: 3_000,
  memoryLimitBytes: 64 * 1024 * 1024,
  maxStdoutBytes: 4_096,
  maxHostCalls: 10_000,
  maxResultBytes: 64 * 1024,
};

describe.each([
  [
    "process",
    (slotsPerProcess: number) =>
      new ProcessDriver({ poolSize: 1, maxProcesses: 2, sessionsPerProcess: slotsPerProcess }),
  ],
  ["in-process", (slotsPerProcess: number) => new InProcessDriver({ maxSessions: 2 * slotsPerProcess })],
] as const)("shared pool (%s driver)", (name, createDriver) => {
  // Room for 24 sessions; the eviction tests use a pool of 6.
  const driver: SandboxDriver = createDriver(12);
  const small: SandboxDriver = createDriver(3);
  const runtimes: MossRuntime[] = [];

  async function compile(
    limits: Partial<ExecutionLimits> = {},
    sandbox: SandboxDriver = driver,
  ): Promise<MossRuntime> {
    const runtime = await new MossCompiler({ sandbox, limits: { ...LIMITS, ...limits } })
      .bind(Vault, new Vault())
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
    await Promise.all([driver.close(), small.close()]);
  });

  test("seven sessions share a pool of six, and none sees another's globals or data", async () => {
    const sessions = await Promise.all(Array.from({ length: 7 }, () => compile({}, small)));
    for (const [index, runtime] of sessions.entries()) {
      expectOk(
        await run(
          runtime,
          `var mine = ${index}; globalThis.leaked = ${index}; function main(moss) { moss.counter = ${index}; return mine; }`,
        ),
      );
    }
    if (small instanceof ProcessDriver) expect(small.pids.length).toBeLessThanOrEqual(2);
    for (const [index, runtime] of sessions.entries()) {
      const seen = await run(
        runtime,
        "function main(moss) { return [typeof mine === 'undefined' ? null : mine, globalThis.leaked ?? null, moss.counter]; }",
      );
      expectOk(seen);
      // Its own definitions when its isolate stayed warm, nothing when it was rebuilt; never another session's.
      const [mine, leaked, counter] = seen.returns as [number | null, number | null, number];
      expect([index, null]).toContain(mine);
      expect([index, null]).toContain(leaked);
      expect(counter).toBe(index);
    }
  });

  test("a session evicted to make room rebuilds from its persisted context on its next execute", async () => {
    const first = await compile({}, small);
    expectOk(
      await run(
        first,
        "var warmOnly = 1; function main(moss) { moss.counter = 41; moss.notes = ['kept']; return 0; }",
      ),
    );
    // More sessions than the pool keeps warm, each used after the first: the first is the least recently used.
    const others = await Promise.all(Array.from({ length: 6 }, () => compile({}, small)));
    for (const other of others) expectOk(await run(other, "function main() { return 1; }"));
    const rebuilt = await run(
      first,
      "function main(moss) { return [moss.counter + 1, moss.notes[0], typeof warmOnly]; }",
    );
    expectOk(rebuilt);
    // The data came back from the persisted context; the isolate (and what only it held) was evicted.
    expect(rebuilt.returns).toEqual([42, "kept", "undefined"]);
  });

  test("while one session spins until its limit, trivial executes of 20 other sessions complete before it ends", async () => {
    let signalSpinning!: () => void;
    const spinningStarted = new Promise<void>((resolve) => {
      signalSpinning = resolve;
    });
    const spinner = await new MossCompiler({ sandbox: driver, limits: LIMITS })
      .bind(Vault, new Vault())
      .withLocals({ spinning: () => signalSpinning() })
      .compile(SECURITY_MODULE);
    runtimes.push(spinner);
    const others = await Promise.all(Array.from({ length: 20 }, () => compile()));
    // Every session is warm first (spread over the pool), so some share the spinner's process.
    for (const runtime of [spinner, ...others]) expectOk(await run(runtime, "function main() { return 0; }"));
    let spinnerEnded = false;
    const spinning = run(spinner, "function main() { spinning(); for (;;) {} }", {
      wallTimeMs: 4_000,
      cpuTimeMs: 4_000,
    }).finally(() => {
      spinnerEnded = true;
    });
    await spinningStarted;
    const trivial = await Promise.all(
      others.map((other, index) =>
        run(other, `function main(moss) { moss.counter = ${index}; return ${index}; }`).then((execution) => ({
          execution,
          beforeSpinnerEnded: !spinnerEnded,
        })),
      ),
    );
    for (const [index, { execution, beforeSpinnerEnded }] of trivial.entries()) {
      expectOk(execution);
      expect(execution.returns).toBe(index);
      // None waited for the spinner's run: each completed while it was still spinning.
      expect(beforeSpinnerEnded, `session ${index} completed only after the spinner ended`).toBe(true);
    }
    const spun = await spinning;
    expect(spun.error?.kind).toBe("timeout");
    // The spinner's session rebuilds; the others keep working and kept their data, wherever they ran.
    expectOk(await run(spinner, "function main() { return 1; }"));
    for (const [index, other] of others.entries()) {
      const after = await run(other, "function main(moss) { return moss.counter; }");
      expectOk(after);
      expect(after.returns).toBe(index);
    }
  });

  test.runIf(name === "process")(
    "a run that crashes its shared process fails only itself; the other sessions there rebuild transparently",
    async () => {
      // Six sessions in a pool of two processes: the victim shares its process with two of them.
      const victim = await compile({ wallTimeMs: 60_000, cpuTimeMs: 60_000 }, small);
      const neighbours = await Promise.all(Array.from({ length: 5 }, () => compile({}, small)));
      for (const [index, neighbour] of neighbours.entries())
        expectOk(await run(neighbour, `function main(moss) { moss.counter = ${index + 10}; return 0; }`));
      expectOk(await run(victim, "function main() { return 0; }"));
      const crashed = await run(victim, "function main() { return new Array(1e9).fill(0).length; }", {
        wallTimeMs: 60_000,
        cpuTimeMs: 60_000,
      });
      expect(crashed.error?.kind).toBe("memory");
      for (const [index, neighbour] of neighbours.entries()) {
        const after = await run(neighbour, "function main(moss) { return moss.counter; }");
        expectOk(after);
        expect(after.returns).toBe(index + 10);
      }
      expectOk(await run(victim, "function main() { return 2; }"));
    },
  );

  test.runIf(name === "process")(
    "runs wait for their shared process in a bounded queue; one past the bound fails with queue-full",
    async () => {
      const own = new ProcessDriver({
        poolSize: 1,
        maxProcesses: 1,
        sessionsPerProcess: 4,
        maxQueuedRuns: 1,
      });
      let signalStarted!: () => void;
      const started = new Promise<void>((resolve) => {
        signalStarted = resolve;
      });
      const compileOn = () =>
        new MossCompiler({ sandbox: own, limits: LIMITS })
          .bind(Vault, new Vault())
          .withLocals({ started: () => signalStarted() })
          .compile(SECURITY_MODULE);
      const [spinner, first, second] = await Promise.all([compileOn(), compileOn(), compileOn()]);
      try {
        for (const runtime of [spinner, first, second])
          expectOk(await run(runtime, "function main() { return 0; }"));
        const spinning = run(spinner, "function main() { started(); for (;;) {} }", {
          wallTimeMs: 1_500,
          cpuTimeMs: 1_500,
        });
        await started;
        // The process runs the spinner; one more run may wait, the other finds the queue full.
        const outcomes = await Promise.allSettled([
          run(first, "function main() { return 'waited'; }"),
          run(second, "function main() { return 'waited'; }"),
        ]);
        const refused = outcomes.filter((outcome) => outcome.status === "rejected");
        const waited = outcomes.filter((outcome) => outcome.status === "fulfilled");
        expect(refused).toHaveLength(1);
        const error = (refused[0] as PromiseRejectedResult).reason as unknown;
        expect(MossError.is(error, "queue-full"), String(error)).toBe(true);
        expect((error as Error).message).toMatch(/runs waiting \(the limit, maxQueuedRuns\)/);
        expect(waited).toHaveLength(1);
        const execution = (waited[0] as PromiseFulfilledResult<Execution>).value;
        expectOk(execution);
        expect(execution.returns).toBe("waited");
        expect((await spinning).error?.kind).toBe("timeout");
      } finally {
        await Promise.all([spinner.close(), first.close(), second.close()]);
        await own.close();
      }
    },
  );

  test.runIf(name === "process")(
    "sessions opened one after another spread evenly over the pool's processes, however many one may hold",
    async () => {
      // A process may keep 64 sessions warm, yet 8 sessions do not pack into the first ready one: a spinner there
      // would hold them all behind its run, each then rebuilt elsewhere.
      const spread = new ProcessDriver({ poolSize: 1, maxProcesses: 4, sessionsPerProcess: 64 });
      const sessions: MossRuntime[] = [];
      try {
        for (let index = 0; index < 8; index++) {
          const runtime = await compile({}, spread);
          sessions.push(runtime);
          expectOk(await run(runtime, "function main() { return 0; }"));
        }
        const holding = spread.pids.filter((pid) => !spread.sparePids.includes(pid));
        expect(holding).toHaveLength(4);
      } finally {
        await Promise.all(sessions.map((runtime) => runtime.close()));
        await spread.close();
      }
    },
  );

  test.runIf(name === "process")(
    "a process past its memory budget keeps no more sessions warm: each one opened there evicts the least recently used",
    async () => {
      const warmth = async (budget: ProcessDriver) => {
        const opened: MossRuntime[] = [];
        try {
          const first = await compile({}, budget);
          opened.push(first);
          expectOk(await run(first, "var warmOnly = 1; function main(moss) { moss.counter = 7; return 0; }"));
          const second = await compile({}, budget);
          opened.push(second);
          expectOk(await run(second, "function main() { return 0; }"));
          const again = await run(first, "function main(moss) { return [typeof warmOnly, moss.counter]; }");
          expectOk(again);
          return again.returns;
        } finally {
          await Promise.all(opened.map((runtime) => runtime.close()));
          await budget.close();
        }
      };
      // One process with room for 8 sessions by count: under the default budget the first session stays warm; over
      // a budget of one byte, opening the second evicts it and it rebuilds from its persisted data.
      expect(
        await warmth(new ProcessDriver({ poolSize: 1, maxProcesses: 1, sessionsPerProcess: 8 })),
      ).toEqual(["number", 7]);
      expect(
        await warmth(
          new ProcessDriver({ poolSize: 1, maxProcesses: 1, sessionsPerProcess: 8, processMemoryBytes: 1 }),
        ),
      ).toEqual(["undefined", 7]);
    },
  );

  test.runIf(name === "process")(
    "close() ends the session; a process still holding others stays",
    async () => {
      const processDriver = driver as ProcessDriver;
      const sessions = await Promise.all(Array.from({ length: 4 }, () => compile()));
      for (const runtime of sessions) expectOk(await run(runtime, "function main() { return 0; }"));
      const pids = processDriver.pids.filter((pid) => !processDriver.sparePids.includes(pid));
      expect(pids.length).toBeLessThanOrEqual(2);
      await sessions[0]!.close();
      for (const runtime of sessions.slice(1)) expectOk(await run(runtime, "function main() { return 1; }"));
    },
  );
});

describe("an execute's wall-time limit bounds its type-check", () => {
  test("a type bomb under a 1 s wall-time limit fails with kind type at that limit, not the check's 10 s", async () => {
    const runtime = await new MossCompiler({ sandbox: "in-process", limits: { wallTimeMs: 1_000 } })
      .bind(Vault, new Vault())
      .compile(SECURITY_MODULE);
    try {
      const bomb =
        "type Grow<A extends unknown[], N extends unknown[]> = N extends [unknown, ...infer R] ? Grow<[...A, ...A], R> : A;\n" +
        Array.from(
          { length: 40 },
          (_, index) =>
            `const t${index}: Grow<[${index}], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]> = 0 as unknown as Grow<[${index + 1}], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]>;`,
        ).join("\n");
      const result = await runtime.execute({ code: `${bomb}\nfunction main(moss: Moss) { return 1; }` });
      expect(result.error?.kind).toBe("type");
      expect(result.error?.message).toContain("the type-check exceeded its limit (1000 ms)");
    } finally {
      await runtime.close();
    }
  });
});

describe("persisting data a run left unchanged", () => {
  test("the context keeps its data across runs that change nothing, and records the next change", async () => {
    const runtime = await new MossCompiler({ sandbox: "in-process", limits: LIMITS })
      .bind(Vault, new Vault())
      .compile(SECURITY_MODULE);
    try {
      expectOk(
        await runtime.execute({
          code: "function main(moss) { moss.notes = ['a', 'b']; moss.counter = 1; }",
          typeCheck: "off",
        }),
      );
      const written = runtime.dumpContext().properties;
      for (let index = 0; index < 2; index++) {
        const read = await runtime.execute({
          code: "function main(moss) { return moss.notes.length + moss.counter; }",
          typeCheck: "off",
        });
        expectOk(read);
        expect(read.returns).toBe(3);
        expect(runtime.dumpContext().properties).toEqual(written);
      }
      expectOk(
        await runtime.execute({ code: "function main(moss) { moss.notes.push('c'); }", typeCheck: "off" }),
      );
      const changed = await runtime.execute({
        code: "function main(moss) { return moss.notes.join(''); }",
        typeCheck: "off",
      });
      expect(changed.returns).toBe("abc");
      expect(runtime.dumpContext().properties).not.toEqual(written);
      expect(decodeProperties(runtime.dumpContext().properties).notes).toEqual(["a", "b", "c"]);
    } finally {
      await runtime.close();
    }
  });
});
