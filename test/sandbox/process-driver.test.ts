import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { decodeWire } from "../../engine/membrane/host/host-wire.ts";
import { acceptsRabGsabFlag, ProcessDriver } from "../../engine/sandbox/process-driver.ts";
import type { SandboxRunRequest, SandboxSession } from "../../engine/sandbox/sandbox.ts";
import { DEFAULT_LIMITS } from "../../engine/types.ts";
import { Ball, TestMembrane } from "./test-membrane.ts";

const LIMITS = { ...DEFAULT_LIMITS, wallTimeMs: 3_000, cpuTimeMs: 3_000 };

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("process driver prestart", () => {
  test("prestart starts one sandbox process before any open; the first open takes it and starts no other at once", async () => {
    const own = new ProcessDriver({ poolSize: 2 });
    try {
      await own.prestart();
      await own.prestart();
      const started = own.pids;
      expect(started).toHaveLength(1);
      expect(own.sparePids).toEqual(started);
      const membrane = new TestMembrane();
      const session = await own.open(
        membrane.setup({ ball: new Ball() }, { count: 0 }, {}),
        membrane,
        LIMITS,
      );
      // A one-shot run (moss run) ends before the pool refills: no process was started for it.
      expect(own.pids).toEqual(started);
      expect(own.sparePids).toEqual([]);
      await session.dispose();
    } finally {
      await own.close();
    }
  });
});

describe("process driver supervision", () => {
  let driver: ProcessDriver;
  beforeAll(async () => {
    driver = new ProcessDriver({ poolSize: 2, unresponsiveGraceMs: 500 });
    await driver.start();
  });
  afterAll(async () => {
    await driver.close();
  });

  async function open(): Promise<SandboxSession> {
    const membrane = new TestMembrane();
    return driver.open(membrane.setup({ ball: new Ball() }, { count: 0 }, {}), membrane, LIMITS);
  }

  const run = (session: SandboxSession, script: string, limits = LIMITS) =>
    session.run({
      script,
      filename: "snippet.js",
      target: "main",
      args: [],
      limits,
    } satisfies SandboxRunRequest);

  test("each session owns its sandbox process, taken from the spares; the spares refill", async () => {
    const spares = driver.sparePids;
    expect(spares).toHaveLength(2);
    const first = await open();
    const second = await open();
    await driver.start();
    expect(driver.sparePids).toHaveLength(2);
    expect(driver.pids).toHaveLength(4);
    expect(driver.sparePids.some((pid) => spares.includes(pid))).toBe(false);
    await first.dispose();
    await second.dispose();
    expect(spares.some(isRunning)).toBe(false);
    expect(driver.pids).toHaveLength(2);
  });

  test("a V8 out-of-memory abort ends only its own session: kind memory, the other session lives on", async () => {
    const victim = await open();
    const bystander = await open();
    await run(bystander, "var kept = 41; function main() { return kept + 1; }");

    // Generous limits: the abort (not the watchdog) must end this run.
    const crashed = await run(victim, "function main() { return new Array(1e9).fill(0).length; }", {
      ...LIMITS,
      wallTimeMs: 60_000,
      cpuTimeMs: 60_000,
    });
    expect(crashed.ok).toBe(false);
    expect(crashed.error?.kind).toBe("memory");
    expect(victim.alive).toBe(false);
    expect(isRunning(process.pid)).toBe(true);

    const survived = await run(bystander, "function main() { return kept + 1; }");
    expect(decodeWire(survived.returns!)).toBe(42);
    expect(bystander.alive).toBe(true);

    const fresh = await open();
    const result = await run(fresh, "function main() { return ball.label; }");
    expect(decodeWire(result.returns!)).toBe("ball");
    await Promise.all([victim.dispose(), bystander.dispose(), fresh.dispose()]);
  });

  test("a sandbox process that stops answering is killed: kind timeout, never a hang", async () => {
    const session = await open();
    const owned = driver.pids.filter((pid) => !driver.sparePids.includes(pid));
    expect(owned).toHaveLength(1);
    const pending = run(session, "async function main() { await ball.roll(1); while (true) {} }", {
      ...LIMITS,
      wallTimeMs: 300,
      cpuTimeMs: 300,
    });
    process.kill(owned[0]!, "SIGSTOP");
    const result = await pending;
    if (isRunning(owned[0]!)) process.kill(owned[0]!, "SIGCONT");
    expect(result.error?.kind).toBe("timeout");
    expect(result.error?.message).toMatch(/did not stop/);
    expect(session.alive).toBe(false);
    const next = await open();
    expect((await run(next, "function main() { return 1; }")).ok).toBe(true);
    await next.dispose();
  });

  test("dispose ends the session's sandbox process", async () => {
    const session = await open();
    const owned = driver.pids.filter((pid) => !driver.sparePids.includes(pid));
    expect(owned).toHaveLength(1);
    await session.dispose();
    expect(isRunning(owned[0]!)).toBe(false);
    expect(session.alive).toBe(false);
  });

  test("close ends every sandbox process", async () => {
    const own = new ProcessDriver({ poolSize: 2 });
    await own.start();
    const pids = own.pids;
    expect(pids).toHaveLength(2);
    const session = await (async () => {
      const membrane = new TestMembrane();
      return own.open(membrane.setup({}, {}, {}), membrane, LIMITS);
    })();
    expect((await run(session, "function main() { return 1; }")).ok).toBe(true);
    await own.close();
    expect(pids.some(isRunning)).toBe(false);
    expect(session.alive).toBe(false);
    await expect(
      own.open(new TestMembrane().setup({}, {}, {}), new TestMembrane(), LIMITS),
    ).rejects.toMatchObject({ code: "sandbox-failed" });
  });
});

describe("a sandbox process that ends while a session opens there", () => {
  test("the open does not wait for an answer no process will send: it opens again in a new process", async () => {
    const own = new ProcessDriver({ poolSize: 1, maxProcesses: 1 });
    try {
      await own.start();
      const [first] = own.pids;
      const membrane = new TestMembrane();
      let setups = 0;
      // The setup is still being made (as a module's definitions compile) when the process dies.
      const setup = async () => {
        setups++;
        if (setups === 1) {
          process.kill(first!, "SIGKILL");
          await new Promise((resolve) => setTimeout(resolve, 300));
        }
        return membrane.setup({ ball: new Ball() }, { count: 0 }, {});
      };
      const session = await own.open(setup, membrane, LIMITS);
      expect(setups).toBe(2);
      expect(own.pids).not.toContain(first);
      expect(
        (
          await session.run({
            script: "function main() { return 41 + 1; }",
            filename: "snippet.js",
            target: "main",
            args: [],
            limits: LIMITS,
          })
        ).ok,
      ).toBe(true);
      await session.dispose();
    } finally {
      await own.close();
    }
  });
});

describe("sandbox process flags", () => {
  test("--no-harmony-rab-gsab goes only to Node lines that accept it (Node 22+ exits 9 on it)", () => {
    expect(acceptsRabGsabFlag("20.20.2")).toBe(true);
    expect(acceptsRabGsabFlag("22.12.0")).toBe(false);
    expect(acceptsRabGsabFlag("24.1.0")).toBe(false);
    expect(acceptsRabGsabFlag("26.0.0")).toBe(false);
  });
});
