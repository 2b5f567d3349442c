import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { MOSS_DIAGNOSTIC_CODES, ModuleChecker, WorkerModuleChecker } from "../../engine/check/index.ts";
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
