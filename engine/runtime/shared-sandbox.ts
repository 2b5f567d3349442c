import type { SandboxDriver } from "../sandbox/sandbox.ts";

const drivers = new Map<SandboxDriver["name"], Promise<SandboxDriver>>();

/**
 * The process-wide driver of a kind, created on first use so runtimes share one warm pool. Loaded lazily:
 * printing a prompt never loads isolated-vm.
 */
export function sharedSandboxDriver(kind: SandboxDriver["name"]): Promise<SandboxDriver> {
  let driver = drivers.get(kind);
  if (!driver) {
    driver = import("../sandbox/index.ts").then(({ createSandboxDriver }) => createSandboxDriver(kind));
    drivers.set(kind, driver);
  }
  return driver;
}

/** Closes the shared drivers (their child processes exit); runtimes opened later start new ones. */
export async function closeSharedSandboxes(): Promise<void> {
  const open = [...drivers.values()];
  drivers.clear();
  // A driver that never started (no isolated-vm fits this Node) has nothing to close: its error was reported.
  await Promise.all(open.map(async (driver) => (await driver.catch(() => undefined))?.close()));
}
