// A type-check worker loads TypeScript from V8's code cache before its checker imports ts-morph (issue 27: from the
// sources each worker file is one bundle, and the bundle's static import of ts-morph ran before the cache was in
// place, so every worker compiled TypeScript's 9 MB again). The worker's first module is check-worker-boot.ts; a
// probe in the checker's place reports what was loaded by the time the checker is imported.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import nodeModule from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { expect, test } from "vitest";
import { checkWorkerEntry } from "../../engine/check/check-worker-start.ts";
import { typeScriptFile } from "../../engine/enable-code-cache.ts";

const NODE_COMPILE_CACHE =
  typeof (nodeModule as { enableCompileCache?: unknown }).enableCompileCache === "function";

const PROBE = `
import nodeModule, { createRequire } from "node:module";
import { parentPort, workerData } from "node:worker_threads";
const require = createRequire(import.meta.url);
parentPort.postMessage({
  data: workerData.data,
  loaded: Object.keys(require.cache),
  compileCacheDir: nodeModule.getCompileCacheDir?.(),
});
`;

test("a type-check worker's checker is imported once TypeScript comes from the code cache", async () => {
  const folder = await mkdtemp(path.join(tmpdir(), "moss-check-boot-"));
  try {
    const probe = path.join(folder, "probe.mjs");
    await writeFile(probe, PROBE);
    const entry = await checkWorkerEntry();
    const worker = new Worker(entry.boot, {
      workerData: { checker: pathToFileURL(probe).href, data: { spare: true } },
      env: Object.fromEntries(
        Object.entries(process.env).filter(([name]) => name !== "NODE_DISABLE_COMPILE_CACHE"),
      ),
    });
    const report = await new Promise<{ data: unknown; loaded: string[]; compileCacheDir?: string }>(
      (resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
      },
    );
    await worker.terminate();
    expect(report.data).toEqual({ spare: true });
    if (NODE_COMPILE_CACHE) {
      // Node's own cache is on in the worker's thread before the checker (and ts-morph) load.
      expect(report.compileCacheDir).toMatch(/code-cache/);
    } else {
      // TypeScript (then ts-morph) were registered from the cache before anything required them.
      expect(report.loaded).toContain(typeScriptFile());
      expect(report.loaded.some((file) => file.endsWith(`${path.sep}ts-morph.js`))).toBe(true);
    }
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
});
