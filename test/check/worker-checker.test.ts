import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  configureCheckerPool,
  liveCheckerWorkers,
  MOSS_DIAGNOSTIC_CODES,
  ModuleChecker,
  WorkerModuleChecker,
  warmCheckerPool,
} from "../../engine/check/index.ts";
import { MossError } from "../../engine/errors.ts";
import { FLAWED_SNIPPETS, SPHERO_HIDDEN_NAMES, VALID_SNIPPETS } from "../fixtures/check/corpus.ts";

const FIXTURES = fileURLToPath(new URL("../fixtures/check/", import.meta.url));
const SPHERO_PATH = path.join(FIXTURES, "sphero.ts");
const SPHERO_SOURCE = readFileSync(SPHERO_PATH, "utf8");
const options = { modulePath: SPHERO_PATH, source: SPHERO_SOURCE, hiddenNames: SPHERO_HIDDEN_NAMES };

const worker = new WorkerModuleChecker({ ...options, idleTimeoutMs: 300 });
afterAll(() => worker.close());

describe("WorkerModuleChecker", () => {
  it("finds exactly what ModuleChecker finds", async () => {
    const inThread = new ModuleChecker(options);
    for (const snippet of [...FLAWED_SNIPPETS.slice(0, 8), ...VALID_SNIPPETS.slice(0, 4)]) {
      expect(await worker.check(snippet.code)).toEqual(inThread.check(snippet.code));
    }
  });

  it("sees accepted definitions and source updates, also after its idle worker ended", async () => {
    worker.accept("function twice(value: number): number {\n  return value * 2;\n}");
    worker.updateSource(`${SPHERO_SOURCE}\nexport const EXTRA = 1;\n`);
    const uses = "function main(moss: Moss) {\n  moss.count = twice(EXTRA);\n}";
    expect(await worker.check(uses)).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 800));
    expect(await worker.check(uses)).toEqual([]);
    expect((await worker.check(`${uses}\nconst x: string = twice(1);`)).map((d) => d.code)).toEqual([2322]);
  });

  it("checks one snippet at a time, in order", async () => {
    const results = await Promise.all([
      worker.check("function main(moss: Moss) {\n  moss.count = 'x';\n}"),
      worker.check("function main(moss: Moss) {\n  moss.count = 1;\n}"),
      worker.check("function main(moss: Moss) {\n  process.exit(1);\n}"),
    ]);
    expect(results.map((diagnostics) => diagnostics.map((d) => d.code))).toEqual([
      [2322],
      [],
      [MOSS_DIAGNOSTIC_CODES.hostGlobal],
    ]);
  });

  it("refuses a relative module path, and checks after close", async () => {
    expect(() => new WorkerModuleChecker({ ...options, modulePath: "sphero.ts" })).toThrow(MossError);
    const closed = new WorkerModuleChecker(options);
    await closed.close();
    await expect(closed.check("const a = 1;")).rejects.toSatisfy((error) =>
      MossError.is(error, "runtime-closed"),
    );
  });
});

describe("WorkerModuleCheckers of one module share one worker", () => {
  // Worker counts below are exact: the checker of the tests above ends first.
  beforeAll(() => worker.close());

  it("share the worker, keep their accepted definitions apart, and forget the worker with the last one", async () => {
    expect(liveCheckerWorkers()).toBe(0);
    const first = new WorkerModuleChecker(options);
    const second = new WorkerModuleChecker(options);
    try {
      first.accept("function onlyFirst(value: number): number {\n  return value;\n}");
      const usesFirst = "function main(moss: Moss) {\n  moss.count = onlyFirst(1);\n}";
      expect(await first.check(usesFirst)).toEqual([]);
      expect((await second.check(usesFirst)).map((diagnostic) => diagnostic.code)).toEqual([2304]);
      expect(liveCheckerWorkers()).toBe(1);
    } finally {
      await first.close();
      await second.close();
    }
    expect(liveCheckerWorkers()).toBe(0);
  });

  it("the same snippet against the same definitions is answered from the module's results, without a worker", async () => {
    const first = new WorkerModuleChecker(options);
    const second = new WorkerModuleChecker(options);
    try {
      const flawed = "function main(moss: Moss) {\n  moss.count = 'x';\n}";
      const found = await first.check(flawed);
      expect(found.map((diagnostic) => diagnostic.code)).toEqual([2322]);
      await first.dispose();
      expect(liveCheckerWorkers()).toBe(0);
      expect(await second.check(flawed)).toEqual(found);
      expect(liveCheckerWorkers()).toBe(0);
      // Other definitions, another answer: the check runs (in a new worker).
      second.accept("const count: string = 'x';");
      expect(await second.check(flawed)).toEqual(found);
      expect(liveCheckerWorkers()).toBe(1);
    } finally {
      await first.close();
      await second.close();
    }
  });

  it("a check over its limit ends the shared worker; the other checker's next check starts a fresh one", async () => {
    const bomber = new WorkerModuleChecker(options);
    const bystander = new WorkerModuleChecker(options);
    try {
      bystander.accept("function kept(): number {\n  return 1;\n}");
      expect(await bystander.check("function main(moss: Moss) {\n  moss.count = kept();\n}")).toEqual([]);
      const bomb =
        "type Grow<A extends unknown[], N extends unknown[]> = N extends [unknown, ...infer R] ? Grow<[...A, ...A], R> : A;\n" +
        Array.from(
          { length: 40 },
          (_, index) =>
            `const t${index}: Grow<[${index}], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]> = 0 as unknown as Grow<[${index + 1}], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]>;`,
        ).join("\n");
      const bombed = await bomber.check(bomb, { timeoutMs: 500 });
      expect(bombed.map((diagnostic) => diagnostic.code)).toEqual([MOSS_DIAGNOSTIC_CODES.checkLimit]);
      expect(await bystander.check("function main(moss: Moss) {\n  moss.count = kept();\n}")).toEqual([]);
    } finally {
      await bomber.close();
      await bystander.close();
    }
  });

  it("at most maxWorkers workers live; the least recently used idle one ends to make room", async () => {
    const previous = configureCheckerPool({ maxWorkers: 1 });
    const one = new WorkerModuleChecker(options);
    const other = new WorkerModuleChecker({
      ...options,
      source: `${SPHERO_SOURCE}\nexport const OTHER = 2;\n`,
    });
    try {
      expect(await one.check("function main(moss: Moss) {\n  moss.count = 1;\n}")).toEqual([]);
      expect(await other.check("function main(moss: Moss) {\n  moss.count = OTHER;\n}")).toEqual([]);
      expect(liveCheckerWorkers()).toBe(1);
      expect(await one.check("function main(moss: Moss) {\n  moss.count = 'x';\n}")).toHaveLength(1);
      expect(liveCheckerWorkers()).toBe(1);
    } finally {
      configureCheckerPool(previous);
      await one.close();
      await other.close();
    }
  });

  it("a worker warmed before any module needs it is the one the next module's checker uses, with the same findings", async () => {
    expect(liveCheckerWorkers()).toBe(0);
    await warmCheckerPool();
    expect(liveCheckerWorkers()).toBe(1);
    await warmCheckerPool();
    expect(liveCheckerWorkers()).toBe(1);
    const warmed = new WorkerModuleChecker(options);
    const inThread = new ModuleChecker(options);
    try {
      for (const snippet of [...FLAWED_SNIPPETS.slice(0, 4), ...VALID_SNIPPETS.slice(0, 2)]) {
        expect(await warmed.check(snippet.code)).toEqual(inThread.check(snippet.code));
      }
      // The module took the warmed worker: no second one started.
      expect(liveCheckerWorkers()).toBe(1);
    } finally {
      await warmed.close();
    }
    expect(liveCheckerWorkers()).toBe(0);
  });

  it("no worker is warmed at the bound; a module needing room ends the warmed one", async () => {
    const previous = configureCheckerPool({ maxWorkers: 1 });
    const one = new WorkerModuleChecker(options);
    const other = new WorkerModuleChecker({ ...options, memoryLimitBytes: 256 * 1024 * 1024 });
    try {
      expect(await one.check("function main(moss: Moss) {\n  moss.count = 1;\n}")).toEqual([]);
      await warmCheckerPool();
      expect(liveCheckerWorkers()).toBe(1);
      await one.dispose();
      await warmCheckerPool();
      expect(liveCheckerWorkers()).toBe(1);
      // Another heap limit than the warmed worker's: a new worker starts in its place, within the bound.
      expect(await other.check("function main(moss: Moss) {\n  moss.count = 'x';\n}")).toHaveLength(1);
      expect(liveCheckerWorkers()).toBe(1);
    } finally {
      configureCheckerPool(previous);
      await one.close();
      await other.close();
    }
  });

  it("prime starts the module's worker ahead of its first check", async () => {
    const primed = new WorkerModuleChecker(options);
    try {
      primed.prime();
      await expect.poll(() => liveCheckerWorkers(), { timeout: 60_000 }).toBe(1);
      expect(await primed.check("function main(moss: Moss) {\n  moss.count = 1;\n}")).toEqual([]);
      expect(liveCheckerWorkers()).toBe(1);
    } finally {
      await primed.close();
    }
  });
});
