import type { InProcessDriverOptions, ProcessDriverOptions, SandboxDriver } from "../sandbox/index.ts";

const drivers = new Map<SandboxDriver["name"], Promise<SandboxDriver>>();
/** Drivers started by `prestartSharedSandbox` that no runtime has used yet. */
const prestarted = new Set<SandboxDriver["name"]>();

/** Bounds of the sandbox pools every runtime of this process shares (see `configureSharedSandboxes`). */
export type SharedSandboxOptions = ProcessDriverOptions & InProcessDriverOptions;

let sharedOptions: SharedSandboxOptions = {};

/**
 * The process-wide driver of a kind, created on first use so runtimes share one bounded pool. Loaded lazily:
 * printing a prompt never loads isolated-vm.
 */
export function sharedSandboxDriver(kind: SandboxDriver["name"]): Promise<SandboxDriver> {
  prestarted.delete(kind);
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
 * Starts the shared driver of a kind and what its first session needs (a sandbox process, a warm isolate) now, in
 * the background: a one-shot `moss run` overlaps that start with loading and compiling its module. Resolves once it
 * is ready, never rejects: failures surface at the first open.
 */
export function prestartSharedSandbox(kind: SandboxDriver["name"]): Promise<void> {
  if (drivers.has(kind)) return Promise.resolve();
  const started = sharedSandboxDriver(kind)
    .then((driver) => driver.prestart?.())
    .catch(() => {});
  prestarted.add(kind);
  return started;
}

/**
 * Sets the bounds of the shared sandbox pools (process count, sessions per process, warm sessions in process, run
 * queues). Applies to the drivers made after it: call it before the first runtime runs, or after
 * `closeSharedSandboxes()`.
 */
export function configureSharedSandboxes(options: SharedSandboxOptions): void {
  sharedOptions = { ...sharedOptions, ...options };
  // A driver only prestarted (no runtime used it yet) is made again with these options when first used.
  for (const kind of prestarted) {
    const driver = drivers.get(kind);
    drivers.delete(kind);
    void driver?.then((started) => started.close()).catch(() => {});
  }
  prestarted.clear();
}

/** Closes the shared drivers (their child processes exit); runtimes opened later start new ones. */
export async function closeSharedSandboxes(): Promise<void> {
  const open = [...drivers.values()];
  drivers.clear();
  prestarted.clear();
  // A driver that never started (no isolated-vm fits this Node) has nothing to close: its error was reported.
  await Promise.all(open.map(async (driver) => (await driver.catch(() => undefined))?.close()));
}
