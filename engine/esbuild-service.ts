// The one way moss-ts reaches esbuild. esbuild's JavaScript API runs its compiler as child processes of the thread
// that uses it — one long-lived service for its asynchronous calls and, for its synchronous calls, a worker thread
// with a service of its own — and keeps them until the process ends: a server that compiled one snippet held ~18 MiB
// per service for good (three in `moss serve` on Node 20: the snippets', tsx's and the context modules' services).
//
// Here every use is counted (the warm path's warm-up, daemon-child.ts, loads it directly: its process runs one
// command and exits), and where `MOSS_ESBUILD_IDLE_MS` is set, once nothing of this thread used esbuild for
// that long its services stop (`esbuild.stop()`); the next use starts them again (~8 ms for the asynchronous service,
// measured on Node 20 here). The timer never holds a process open. `moss serve` and `moss worker` set it (bin/moss.js,
// 5 s) together with `ESBUILD_WORKER_THREADS=0`, which esbuild reads when it loads: its synchronous calls then run a
// compiler process each and wait for it, with no worker thread. The stop requires that: stopping the worker thread
// leaves its compiler process unreaped (a zombie per stop), so where `ESBUILD_WORKER_THREADS` was not 0 when this
// file loaded (esbuild reads it once, when it loads, which is not later) nothing stops.
//
// Unset, nothing is stopped: esbuild's services belong to the process, and an application that embeds moss-ts and
// uses the same esbuild (one copy per path) would see its own builds cancelled by a stop.
import { createRequire } from "node:module";

type Esbuild = typeof import("esbuild");

const require = createRequire(import.meta.url);

/** Whether esbuild's synchronous calls run without a worker thread in this thread (see above). */
const WITHOUT_WORKER_THREAD = process.env.ESBUILD_WORKER_THREADS === "0";

/** esbuild once this file loaded it (the first `withEsbuild`), for the calls after. */
let api: Esbuild | undefined;
let active = 0;
let timer: ReturnType<typeof setTimeout> | undefined;

/**
 * How long this thread's esbuild services outlive their last use: `MOSS_ESBUILD_IDLE_MS` in milliseconds (0: stop as
 * soon as nothing compiles); undefined (never stopped) when it is unset or not a number of 0 or more, or when
 * `ESBUILD_WORKER_THREADS` is not "0" (in `env`, and in this thread's environment when this file loaded).
 */
export function esbuildIdleMs(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.MOSS_ESBUILD_IDLE_MS?.trim();
  if (raw === undefined || raw === "" || env.ESBUILD_WORKER_THREADS !== "0" || !WITHOUT_WORKER_THREAD)
    return undefined;
  const value = Number(raw);
  return Number.isFinite(value) && value >= 0 ? value : undefined;
}

/**
 * Marks this thread's esbuild as in use until the returned function is called: its services are not stopped while
 * any hold is open (a module hook holds it across the loaders after it, which compile with the same esbuild). A second
 * call of the release does nothing.
 */
export function holdEsbuild(): () => void {
  active += 1;
  if (timer !== undefined) {
    clearTimeout(timer);
    timer = undefined;
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    active -= 1;
    if (active === 0) scheduleStop();
  };
}

/**
 * Runs `work` with esbuild (loaded on first use: a process that never compiles never loads it), holding its services
 * until `work` (or the promise it returns) settles.
 */
export function withEsbuild<T>(work: (esbuild: Esbuild) => T): T {
  const release = holdEsbuild();
  let result: T;
  try {
    api ??= require("esbuild") as Esbuild;
    result = work(api);
  } catch (error) {
    release();
    throw error;
  }
  if (result instanceof Promise) return result.finally(release) as T;
  release();
  return result;
}

/**
 * esbuild if this thread loaded it, by this file or by another (a loader after the module hooks, tsx, imports it
 * itself), else undefined: a thread that never loaded it has no service to stop.
 */
function loaded(): Esbuild | undefined {
  try {
    return require.cache[require.resolve("esbuild")]?.exports as Esbuild | undefined;
  } catch {
    return undefined;
  }
}

function scheduleStop(): void {
  const idleMs = esbuildIdleMs();
  if (idleMs === undefined) return;
  timer = setTimeout(() => {
    timer = undefined;
    if (active === 0) void (api ?? loaded())?.stop();
  }, idleMs);
  timer.unref();
}
