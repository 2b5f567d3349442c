import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { MOSS_DIAGNOSTIC_CODES, WorkerModuleChecker } from "../../engine/check/index.ts";
import { typeBomb } from "../helpers/type-bomb.ts";

/*
 * Issue 24 §2: a check is bounded by its own execute's deadline, from the moment it is asked. Before, a check's
 * time limit started only once it reached the module's worker: a session's check queued behind another session's
 * type bomb waited for the bomb to run to its own limit.
 */

const folder = mkdtempSync(path.join(os.tmpdir(), "moss-check-deadline-"));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

const HONEST = "function main(moss: Moss) {\n  moss.count = moss.count + 1;\n}";

describe("a check's deadline", () => {
  it("a check queued behind another session's bomb ends by its own deadline; the bomb's worker is recycled at the bomb's deadline and the next honest check succeeds", async () => {
    const options = {
      modulePath: path.join(folder, "shared.ts"),
      source: "export class Moss {\n  count = 0;\n}\n",
      hiddenNames: [],
      // The checks' own limit is long: only the deadlines end them.
      timeoutMs: 120_000,
    };
    const bomber = new WorkerModuleChecker(options);
    const hurried = new WorkerModuleChecker(options);
    const patient = new WorkerModuleChecker(options);
    try {
      // The module's worker is loaded (its load is not any check's time).
      expect(await patient.check("const warm = 1;")).toEqual([]);

      let bombDone = false;
      const bombing = bomber.check(typeBomb(8), { deadlineMs: 3_000 }).finally(() => {
        bombDone = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      // Asked after the bomb, with a longer deadline: waits in line, runs once the bomb's worker is replaced.
      const patiently = patient.check(HONEST, { deadlineMs: 120_000 });
      // Asked last, with the earliest deadline: first in line, and that deadline passes while the bomb runs.
      const hurriedResult = await hurried.check(HONEST, { deadlineMs: 800 });
      expect(bombDone).toBe(false);
      expect(hurriedResult.map((diagnostic) => diagnostic.code)).toEqual([MOSS_DIAGNOSTIC_CODES.checkLimit]);
      expect(hurriedResult[0]?.message).toContain("execute's time limit");

      const bombed = await bombing;
      expect(bombed.map((diagnostic) => diagnostic.code)).toEqual([MOSS_DIAGNOSTIC_CODES.checkLimit]);
      // Its own deadline ended it (or, on a fast machine, its worker's memory first).
      expect(bombed[0]?.message).toMatch(/exceeded its limit \((3000 ms|512 MiB of memory)\)/);
      expect(await patiently).toEqual([]);
    } finally {
      await bomber.close();
      await hurried.close();
      await patient.close();
    }
  }, 120_000);

  it("a check with no time left fails at once, without waiting for the worker", async () => {
    const checker = new WorkerModuleChecker({
      modulePath: path.join(folder, "late.ts"),
      source: "export class Moss {\n  count = 0;\n}\n",
      hiddenNames: [],
    });
    try {
      const late = await checker.check(HONEST, { deadlineMs: 1_000, startedAt: performance.now() - 2_000 });
      expect(late.map((diagnostic) => diagnostic.code)).toEqual([MOSS_DIAGNOSTIC_CODES.checkLimit]);
      expect(await checker.check(HONEST, { deadlineMs: 120_000 })).toEqual([]);
    } finally {
      await checker.close();
    }
  }, 120_000);
});
