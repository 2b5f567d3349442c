import type { InProcessDriverOptions } from "../sandbox/in-process-driver.ts";
import type { ProcessDriverOptions } from "../sandbox/process-driver.ts";
import type { SandboxDriver } from "../sandbox/sandbox.ts";

const drivers = new Map<SandboxDriver["name"], Promise<SandboxDriver>>();

/** Bounds of the sandbox pools every runtime of this process shares (see `configureSharedSandboxes`). */
export type SharedSandboxOptions = ProcessDriverOptions & InProcessDriverOptions;

let sharedOptions: SharedSandboxOptions = {};

/**
 * The process-wide driver of a kind, created on first use so runtimes share one bounded pool. Loaded lazily:
 * printing a prompt never loads isolated-vm.
 */
export function sharedSandboxDriver(kind: SandboxDriver["name"]): Promise<SandboxDriver> {
  let driver = drivers.get(kind);
  if (!driver) {
    const options = sharedOptions;
    driver = import("../sandbox/index.ts").then(({ createSandboxDriver }) =>
      createSandboxDriver(kind, options),
    );
    drivers.set(kind, driver);
  }
  return driver;
}

/**
 * Sets the bounds of the shared sandbox pools (process count, sessions per process, warm sessions in process, run
 * queues). Applies to the drivers made after it: call it before the first runtime runs, or after
 * `closeSharedSandboxes()`.
 */
export function configureSharedSandboxes(options: SharedSandboxOptions): void {
  sharedOptions = { ...sharedOptions, ...options };
}

/** Closes the shared drivers (their child processes exit); runtimes opened later start new ones. */
export async function closeSharedSandboxes(): Promise<void> {
  const open = [...drivers.values()];
  drivers.clear();
  // A driver that never started (no isolated-vm fits this Node) has nothing to close: its error was reported.
  await Promise.all(open.map(async (driver) => (await driver.catch(() => undefined))?.close()));
}
