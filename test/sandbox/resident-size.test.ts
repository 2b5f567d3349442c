import fs from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { afterAll, afterEach, beforeEach, expect, test, vi } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { ProcessDriver } from "../../engine/sandbox/process-driver.ts";
import { Vault } from "../fixtures/security/vault.ts";
import { SECURITY_MODULE } from "../security/security-harness.ts";

/*
 * Placing a session in the process driver never reads a file on the host's thread: the sandbox processes' resident
 * sizes (for `processMemoryBytes` and the run's memory watch) are read asynchronously after each open and run. Every
 * synchronous read of `/proc` in this process is counted while sessions are opened, run and placed; the bound itself
 * still evicts (test/runtime/shared-pools.test.ts holds its behaviour).
 */

let procReads: string[] = [];
beforeEach(() => {
  procReads = [];
  const readFileSync = fs.readFileSync;
  vi.spyOn(fs, "readFileSync").mockImplementation(((file: fs.PathOrFileDescriptor, ...rest: unknown[]) => {
    if (String(file).startsWith("/proc/")) procReads.push(String(file));
    return (readFileSync as (...parameters: unknown[]) => unknown)(file, ...rest);
  }) as typeof fs.readFileSync);
  // Named imports of node:fs (`import { readFileSync } from "node:fs"`) see the spy too.
  syncBuiltinESMExports();
});
afterEach(() => {
  vi.restoreAllMocks();
  syncBuiltinESMExports();
});

const driver = new ProcessDriver({
  poolSize: 1,
  maxProcesses: 1,
  sessionsPerProcess: 8,
  processMemoryBytes: 1,
});
afterAll(async () => {
  await driver.close();
});

test.runIf(process.platform === "linux")(
  "opening and running sessions under a memory bound reads /proc only asynchronously; the bound still evicts",
  async () => {
    const runtimes: MossRuntime[] = [];
    try {
      for (let index = 0; index < 4; index++) {
        const runtime = await new MossCompiler({ sandbox: driver })
          .bind(Vault, new Vault())
          .compile(SECURITY_MODULE);
        runtimes.push(runtime);
        const execution = await runtime.execute({
          code: `var warm${index} = ${index}; function main() { return ${index}; }`,
          typeCheck: "off",
        });
        expect(execution.error, JSON.stringify(execution.error)).toBeUndefined();
      }
      // Over a budget of one byte each open evicted the session before it: the first rebuilt, its warm name gone.
      const again = await runtimes[0]!.execute({
        code: "function main() { return typeof warm0; }",
        typeCheck: "off",
      });
      expect(again.returns).toBe("undefined");
      expect(procReads).toEqual([]);
    } finally {
      await Promise.all(runtimes.map((runtime) => runtime.close()));
    }
  },
);
