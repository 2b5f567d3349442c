// Starting type-check workers, and the spare one started before any module needs it. Kept apart from the checker
// (no TypeScript imported here): the CLI starts the spare first thing, and TypeScript then loads in the worker while
// the host loads the context module.
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { runnableEntryAsync } from "../runnable-entry.ts";
import type {
  CheckWorkerBootData,
  CheckWorkerData,
  CheckWorkerReply,
  SpareCheckWorkerData,
} from "./check-worker.ts";

/** Default heap limit of the type-check worker. */
export const DEFAULT_TYPE_CHECK_MEMORY_BYTES = 512 * 1024 * 1024;
/** An idle worker (the spare too) ends after this long. */
export const DEFAULT_IDLE_TIMEOUT_MS = 300_000;
const MEBIBYTE = 1024 * 1024;
/**
 * The worker's young generation, fixed. Node ends a worker at its heap limit with only 16 MiB of leeway; past that V8
 * aborts the whole process. Left to Node, the young generation grows with the old one (Node 24: 192 MiB next to a
 * 160 MiB old generation), and one scavenge then promotes more than the leeway at the limit: a type bomb killed
 * the host ("Reached heap limit") instead of ending the worker with ERR_WORKER_OUT_OF_MEMORY.
 */
const YOUNG_GENERATION_MB = 16;

const EXTENSION = import.meta.url.endsWith(".ts") ? ".ts" : ".js";
const BOOT_ENTRY = new URL(`./check-worker-boot${EXTENSION}`, import.meta.url);
const WORKER_ENTRY = new URL(`./check-worker${EXTENSION}`, import.meta.url);

/** The files a type-check worker runs: its first module, then the checker (check-worker-boot.ts says why two). */
export interface CheckWorkerEntry {
  boot: string;
  /** The checker's URL. */
  checker: string;
}

/** The files a type-check worker runs (each bundled once per process when moss-ts runs from its sources). */
export async function checkWorkerEntry(): Promise<CheckWorkerEntry> {
  const [boot, checker] = await Promise.all([
    runnableEntryAsync(BOOT_ENTRY),
    runnableEntryAsync(WORKER_ENTRY, { external: ["ts-morph"] }),
  ]);
  return { boot, checker: pathToFileURL(checker).href };
}

/** A type-check worker, unreferenced, with its heap limits and its stdio piped but never read. */
export function startCheckWorker(
  entry: CheckWorkerEntry,
  data: CheckWorkerData | SpareCheckWorkerData,
  memoryLimitBytes: number,
): Worker {
  const worker = new Worker(entry.boot, {
    workerData: { checker: entry.checker, data } satisfies CheckWorkerBootData,
    resourceLimits: {
      maxOldGenerationSizeMb: Math.max(16, Math.floor(memoryLimitBytes / MEBIBYTE)),
      maxYoungGenerationSizeMb: YOUNG_GENERATION_MB,
    },
    stdout: true,
    stderr: true,
  });
  // An idle checker never keeps the process alive; a pending check holds its own timer. Its stdout and stderr
  // are piped (so nothing it prints reaches the user's terminal) but never read: reading a worker's stdio
  // re-references it on Node 20, and the process would not end until the idle timer (minutes later). The
  // worker discards its own output (check-worker.ts), so nothing accumulates in the pipes.
  worker.unref();
  return worker;
}

interface Spare {
  worker: Worker;
  /** Settles once the worker has loaded TypeScript and its lib, ended, or was taken. */
  warmed: Promise<void>;
  settle: () => void;
  memoryLimitBytes: number;
  idleTimer: NodeJS.Timeout;
}

let spare: Spare | undefined;
let warming: Promise<void> | undefined;

/** Options of `startSpareCheckWorker`. */
export interface SpareCheckWorkerOptions {
  /** Heap of the worker; a module's checker takes the spare only if it has the same limit. Default 512 MiB. */
  memoryLimitBytes?: number;
  /** The spare ends if no checker took it after this long. Default 300000 ms. */
  idleTimeoutMs?: number;
  /** Most type-check workers of this process (the pool's `maxWorkers`): no spare starts at the bound. */
  maxWorkers?: number;
  /** Type-check workers running now (the pool's count): no spare starts at the bound. */
  liveWorkers?: number;
}

/**
 * Starts a spare type-check worker, if there is none and the bound allows one: it loads TypeScript, parses and binds
 * its lib and checks a snippet once, then waits; the next module whose checker starts a worker takes it. Resolves
 * once that is done (or the worker ended); callers that only want it to happen need not wait.
 */
export function startSpareCheckWorker(options: SpareCheckWorkerOptions = {}): Promise<void> {
  if (spare !== undefined) return spare.warmed;
  if (options.maxWorkers !== undefined && (options.liveWorkers ?? 0) >= options.maxWorkers) {
    return Promise.resolve();
  }
  warming ??= (async () => {
    try {
      const entry = await checkWorkerEntry();
      if (spare !== undefined) return;
      const memoryLimitBytes = positive(options.memoryLimitBytes, DEFAULT_TYPE_CHECK_MEMORY_BYTES);
      const worker = startCheckWorker(entry, { spare: true }, memoryLimitBytes);
      const idleTimer = setTimeout(
        endSpareCheckWorker,
        positive(options.idleTimeoutMs, DEFAULT_IDLE_TIMEOUT_MS),
      );
      idleTimer.unref();
      let settle = (): void => {};
      const warmed = new Promise<void>((resolve) => (settle = resolve));
      const started: Spare = { worker, warmed, settle, memoryLimitBytes, idleTimer };
      const onMessage = (reply: CheckWorkerReply): void => {
        if (reply.type !== "warmed") return;
        worker.off("message", onMessage);
        settle();
      };
      const gone = (): void => {
        settle();
        if (spare === started) endSpareCheckWorker();
      };
      worker.on("message", onMessage);
      worker.on("error", gone);
      worker.on("exit", gone);
      spare = started;
    } finally {
      warming = undefined;
    }
  })();
  return warming.then(() => spare?.warmed);
}

/** Hands over the spare worker if it was started with this heap limit (else none). */
export function takeSpareCheckWorker(memoryLimitBytes: number): Worker | undefined {
  const taken = spare;
  if (taken === undefined || taken.memoryLimitBytes !== memoryLimitBytes) return undefined;
  spare = undefined;
  clearTimeout(taken.idleTimer);
  taken.worker.removeAllListeners("error").removeAllListeners("exit").removeAllListeners("message");
  taken.settle();
  return taken.worker;
}

/**
 * Ends a type-check worker. Node's `terminate()` holds the process open (it references the worker again) until the
 * thread is gone, tens of ms for a checker's heap; a process with nothing else to do exits at once instead (the
 * thread ends with it). Resolves when the thread ended, or never if the process exits first.
 */
export function terminateCheckWorker(worker: Worker): Promise<void> {
  const ended = worker.terminate().then(
    () => {},
    () => {},
  );
  worker.unref();
  return ended;
}

/** Ends the spare worker, if any. */
export function endSpareCheckWorker(): void {
  const ended = spare;
  if (ended === undefined) return;
  spare = undefined;
  clearTimeout(ended.idleTimer);
  ended.settle();
  void terminateCheckWorker(ended.worker);
}

/** How many spare workers run (0 or 1). */
export function spareCheckWorkers(): number {
  return spare === undefined ? 0 : 1;
}

function positive(value: number | undefined, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : fallback;
}
