import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configureCheckerPool } from "../../engine/check/index.ts";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { Execution, ExecutionLimits } from "../../engine/types.ts";
import { typeBomb } from "../helpers/type-bomb.ts";

/*
 * Issue 24 §2: two other modules' type bombs filling the process's pool of type-check workers held a third module's
 * 2 s execute for 8–10 s. An execute's wall time bounds its type-check from the execute's start, waiting for a worker
 * included: no module's bombs can hold another module's execute past its own limit.
 */

const folder = mkdtempSync(path.join(os.tmpdir(), "moss-check-deadline-attacks-"));
let previousPool: ReturnType<typeof configureCheckerPool>;

beforeAll(() => {
  previousPool = configureCheckerPool({ maxWorkers: 2 });
  for (const name of ["bomber-a", "bomber-b", "honest-c"]) {
    writeFileSync(
      path.join(folder, `${name}.ts`),
      `/** What the model may use. */\nexport class Moss {\n  count = 0;\n}\n\n/** The module's name. */\nexport const NAME = "${name}";\n`,
    );
  }
});
afterAll(() => {
  configureCheckerPool(previousPool);
  rmSync(folder, { recursive: true, force: true });
});

const HONEST = "function main(moss: Moss) {\n  return NAME.length + moss.count;\n}";

async function compile(name: string, limits: Partial<ExecutionLimits>): Promise<MossRuntime> {
  return new MossCompiler({ sandbox: "in-process", limits }).compile(path.join(folder, `${name}.ts`));
}

describe("no module's type bombs hold another module's execute past its wall time", () => {
  it("bombs of two other modules fill the worker pool; a third module's execute ends by its own deadline, and checks once they are gone", async () => {
    // The bombs may run long (their own limits are a minute); the honest execute has seconds.
    const bombLimits = { wallTimeMs: 60_000, typeCheckTimeoutMs: 60_000 };
    const bomberA = await compile("bomber-a", bombLimits);
    const bomberB = await compile("bomber-b", bombLimits);
    const honest = await compile("honest-c", { wallTimeMs: 60_000 });
    const bombsDone = { a: false, b: false };
    const bombing: Array<Promise<Execution>> = [];
    try {
      // Each bomb module's worker is loaded first: the pool is full (maxWorkers 2) with them.
      for (const bomber of [bomberA, bomberB]) {
        expect(await bomber.typecheck("const warm = NAME;")).toEqual([]);
      }
      bombing.push(
        bomberA.execute({ code: `${typeBomb(8)}\n${HONEST}` }).finally(() => {
          bombsDone.a = true;
        }),
        bomberB.execute({ code: `${typeBomb(8)}\n${HONEST}` }).finally(() => {
          bombsDone.b = true;
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 200));

      const held = await honest.execute({ code: HONEST, timeoutMs: 1_500 });
      // It ended by its deadline while both bombs still ran (they end at their own limit, seconds later).
      expect(bombsDone).toEqual({ a: false, b: false });
      expect(held.ok).toBe(false);
      expect(held.error?.kind).toBe("type");
      expect(held.error?.message).toContain("type-check worker");

      // The bombs end at their own limits (memory or time), each a type error of its own execute only.
      for (const bombed of await Promise.all(bombing)) {
        expect(bombed.error?.kind).toBe("type");
      }
      // With the bombs gone, the honest module's next execute is checked and runs.
      const checked = await honest.execute({ code: HONEST, timeoutMs: 60_000 });
      expect(checked.error).toBeUndefined();
      expect(checked.returns).toBe("honest-c".length);
    } finally {
      await Promise.all([bomberA.close(), bomberB.close(), honest.close()]);
      await Promise.allSettled(bombing);
    }
  }, 180_000);

  it("a session's execute queued behind another session's bomb in the same module ends by its deadline; the bomb's worker is recycled at the bomb's own deadline and the next execute is checked", async () => {
    const bomber = await compile("honest-c", { wallTimeMs: 3_000, typeCheckTimeoutMs: 60_000 });
    const neighbour = await compile("honest-c", { wallTimeMs: 60_000 });
    let bombDone = false;
    let bombing: Promise<Execution> | undefined;
    try {
      expect(await neighbour.typecheck("const warm = NAME;")).toEqual([]);
      bombing = bomber.execute({ code: `${typeBomb(8)}\n${HONEST}` }).finally(() => {
        bombDone = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      const held = await neighbour.execute({ code: HONEST, timeoutMs: 1_000 });
      expect(bombDone).toBe(false);
      expect(held.error?.kind).toBe("type");
      expect(held.error?.message).toContain("time limit");

      const bombed = await bombing;
      expect(bombed.error?.kind).toBe("type");
      const checked = await neighbour.execute({ code: HONEST });
      expect(checked.error).toBeUndefined();
      expect(checked.returns).toBe("honest-c".length);
    } finally {
      await Promise.all([bomber.close(), neighbour.close()]);
      await bombing?.catch(() => {});
    }
  }, 180_000);
});
