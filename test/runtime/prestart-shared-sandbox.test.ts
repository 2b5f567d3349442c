import { afterAll, expect, test } from "vitest";
import {
  closeSharedSandboxes,
  configureSharedSandboxes,
  prestartSharedSandbox,
  sharedSandboxDriver,
} from "../../engine/runtime/shared-sandbox.ts";
import type { ProcessDriver } from "../../engine/sandbox/process-driver.ts";

afterAll(async () => {
  await closeSharedSandboxes();
});

test("a prestarted shared driver no runtime used yet is made again with options configured after it", async () => {
  prestartSharedSandbox("process");
  configureSharedSandboxes({ poolSize: 1 });
  const driver = (await sharedSandboxDriver("process")) as ProcessDriver;
  await driver.start();
  // The configured pool of one spare, not the default two of a driver made before the option was set.
  expect(driver.sparePids).toHaveLength(1);
});
