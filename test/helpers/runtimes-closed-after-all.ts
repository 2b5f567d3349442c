import { afterAll } from "vitest";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";

/** A list the test file adds its runtimes to: after all its tests they are closed, then the shared sandboxes. */
export function runtimesClosedAfterAll(): MossRuntime[] {
  const runtimes: MossRuntime[] = [];
  afterAll(async () => {
    await Promise.all(runtimes.map((runtime) => runtime.close()));
    await closeSharedSandboxes();
  });
  return runtimes;
}
