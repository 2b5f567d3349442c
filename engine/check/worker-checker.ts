import path from "node:path";
import { Worker } from "node:worker_threads";
import { MossError } from "../errors.ts";
import { runnableEntryAsync } from "../runnable-entry.ts";
import type { Diagnostic } from "../types.ts";
import type { CheckWorkerData, CheckWorkerReply, CheckWorkerRequest } from "./check-worker.ts";
import { MOSS_DIAGNOSTIC_CODES } from "./diagnostic-codes.ts";
import { checkLimitDiagnostic, type ModuleCheckerOptions } from "./module-checker.ts";
import { scrubMessage } from "./scrub-message.ts";

/** What a WorkerModuleChecker checks against, and the limits of its worker. */
export interface WorkerModuleCheckerOptions extends Omit<ModuleCheckerOptions, "project"> {
  /** Time one check may take once the worker is ready. Default 10000 ms. */
  timeoutMs?: number;
  /** Heap of the worker (old generation). Default 512 MiB. */
  memoryLimitBytes?: number;
  /** Time a new worker may take to load the module's types before its first check. Default 60000 ms. */
  startTimeoutMs?: number;
  /** An idle worker is ended after this long (its program's memory released); the next check starts a new one. Default 300000 ms. */
  idleTimeoutMs?: number;
}

/** Default time limit of one type-check. */
export const DEFAULT_TYPE_CHECK_TIMEOUT_MS = 10_000;
/** Default heap limit of the type-check worker. */
export const DEFAULT_TYPE_CHECK_MEMORY_BYTES = 512 * 1024 * 1024;
const DEFAULT_START_TIMEOUT_MS = 60_000;
const DEFAULT_IDLE_TIMEOUT_MS = 300_000;
const MEBIBYTE = 1024 * 1024;
/**
 * The worker's young generation, fixed. Node ends a worker at its heap limit with only 16 MiB of leeway; past that V8
 * aborts the whole process. Left to Node, the young generation grows with the old one (Node 24: 192 MiB next to a
 * 160 MiB old generation), and one scavenge then promotes more than the leeway at the limit: a type bomb killed
 * the host ("Reached heap limit") instead of ending the worker with ERR_WORKER_OUT_OF_MEMORY.
 */
const YOUNG_GENERATION_MB = 16;
/** Most snippets replayed into a fresh worker (the newest; older definitions are usually redefined by then). */
const MAX_ACCEPTED = 256;
/** Longest text of a worker failure shown in a diagnostic. */
const MAX_FAILURE_LENGTH = 500;

const WORKER_ENTRY = new URL(
  import.meta.url.endsWith(".ts") ? "./check-worker.ts" : "./check-worker.js",
  import.meta.url,
);

interface Started {
  worker: Worker;
  ready: Promise<"ready" | Diagnostic>;
}

type Ending = { kind: "memory" } | { kind: "failed"; message: string };

/**
 * Type-checks the model's snippets like `ModuleChecker`, in a worker thread with its own heap and time limits,
 * so that checking (model-controlled work: a few lines of recursive types can take seconds and a gigabyte) never
 * blocks the host's event loop. The worker keeps the program warm between checks; a check that runs out of time
 * or memory ends its worker and comes back as a located `type` error, and the next check starts a fresh worker
 * with the same module and accepted snippets.
 */
export class WorkerModuleChecker {
  readonly #options: Omit<ModuleCheckerOptions, "project">;
  readonly #timeoutMs: number;
  readonly #memoryLimitBytes: number;
  readonly #startTimeoutMs: number;
  readonly #idleTimeoutMs: number;
  #idleTimer: NodeJS.Timeout | undefined;
  #pending = 0;
  readonly #accepted: string[] = [];
  #started: Started | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  #nextId = 1;
  #disposed = false;

  constructor(options: WorkerModuleCheckerOptions) {
    if (typeof options?.modulePath !== "string" || !path.isAbsolute(options.modulePath)) {
      throw new MossError(
        "invalid-argument",
        `WorkerModuleChecker needs an absolute modulePath, got ${String(options?.modulePath)}`,
        { modulePath: options?.modulePath },
      );
    }
    const { timeoutMs, memoryLimitBytes, startTimeoutMs, idleTimeoutMs, ...checkerOptions } = options;
    this.#options = { ...checkerOptions, hiddenNames: [...(options.hiddenNames ?? [])] };
    this.#timeoutMs = positive(timeoutMs, DEFAULT_TYPE_CHECK_TIMEOUT_MS);
    this.#memoryLimitBytes = positive(memoryLimitBytes, DEFAULT_TYPE_CHECK_MEMORY_BYTES);
    this.#startTimeoutMs = positive(startTimeoutMs, DEFAULT_START_TIMEOUT_MS);
    this.#idleTimeoutMs = positive(idleTimeoutMs, DEFAULT_IDLE_TIMEOUT_MS);
  }

  /** Type-checks a snippet in the worker; one check at a time, each within the time limit (or `timeoutMs`). */
  check(snippet: string, options: { timeoutMs?: number } = {}): Promise<Diagnostic[]> {
    if (typeof snippet !== "string") {
      return Promise.reject(
        new MossError(
          "invalid-argument",
          `WorkerModuleChecker.check needs the snippet text, got ${typeof snippet}`,
        ),
      );
    }
    const timeoutMs = positive(options.timeoutMs, this.#timeoutMs);
    clearTimeout(this.#idleTimer);
    this.#pending++;
    const result = this.#queue.then(() => this.#checkNow(snippet, timeoutMs));
    this.#queue = result.catch(() => {});
    void this.#queue.then(() => {
      if (--this.#pending === 0) this.#armIdleTimer();
    });
    return result;
  }

  /** Remembers a snippet that ran: its top-level definitions are visible to later checks. */
  accept(snippet: string): void {
    this.#accepted.push(snippet);
    if (this.#accepted.length > MAX_ACCEPTED) this.#accepted.shift();
    this.#post({ type: "accept", snippet });
  }

  /** The module's code changed: later checks see the new source. */
  updateSource(source: string): void {
    this.#options.source = source;
    this.#post({ type: "updateSource", source });
  }

  /** Ends the worker; a later check starts a new one. */
  async dispose(): Promise<void> {
    clearTimeout(this.#idleTimer);
    const started = this.#started;
    this.#started = undefined;
    if (started) await started.worker.terminate().catch(() => {});
  }

  /** Ends the worker for good: later checks are refused. */
  async close(): Promise<void> {
    this.#disposed = true;
    await this.dispose();
  }

  async #checkNow(snippet: string, timeoutMs: number): Promise<Diagnostic[]> {
    if (this.#disposed) throw new MossError("runtime-closed", "this checker is closed", {});
    let started: Started;
    try {
      started = await this.#start();
    } catch (error) {
      return [this.#failure(error instanceof Error ? error.message : String(error))];
    }
    const ready = await started.ready;
    if (ready !== "ready") {
      return [ready.code === MOSS_DIAGNOSTIC_CODES.checkLimit ? { ...ready, ...located(snippet) } : ready];
    }
    const id = this.#nextId++;
    const worker = started.worker;
    return new Promise<Diagnostic[]>((resolve) => {
      let settled = false;
      const finish = (diagnostics: Diagnostic[], endWorker: boolean): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        worker.off("message", onMessage);
        worker.off("error", onError);
        worker.off("exit", onExit);
        if (endWorker) this.#end(started);
        resolve(diagnostics);
      };
      const onMessage = (reply: CheckWorkerReply): void => {
        if (reply.type === "checked" && reply.id === id) finish(reply.diagnostics, false);
        else if (reply.type === "failed" && reply.id === id) finish([this.#failure(reply.message)], true);
      };
      const onError = (error: Error): void => {
        finish([this.#ending(snippet, endingOf(error))], true);
      };
      const onExit = (): void => {
        finish([this.#ending(snippet, { kind: "failed", message: "the checker's worker stopped" })], true);
      };
      const timer = setTimeout(
        () => finish([checkLimitDiagnostic(snippet, `${timeoutMs} ms`)], true),
        timeoutMs,
      );
      worker.on("message", onMessage);
      worker.on("error", onError);
      worker.on("exit", onExit);
      worker.postMessage({ type: "check", id, snippet } satisfies CheckWorkerRequest);
    });
  }

  async #start(): Promise<Started> {
    if (this.#started) return this.#started;
    const entry = await runnableEntryAsync(WORKER_ENTRY, { external: ["ts-morph"] });
    if (this.#started) return this.#started;
    const data: CheckWorkerData = { options: this.#options, accepted: [...this.#accepted] };
    const worker = new Worker(entry, {
      workerData: data,
      resourceLimits: {
        maxOldGenerationSizeMb: Math.max(16, Math.floor(this.#memoryLimitBytes / MEBIBYTE)),
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
    const started: Started = { worker, ready: Promise.resolve("ready") };
    started.ready = new Promise<"ready" | Diagnostic>((resolve) => {
      const finish = (result: "ready" | Diagnostic): void => {
        clearTimeout(timer);
        worker.off("message", onMessage);
        worker.off("error", onError);
        worker.off("exit", onExit);
        if (result !== "ready") this.#end(started);
        resolve(result);
      };
      const onMessage = (reply: CheckWorkerReply): void => {
        if (reply.type === "ready") finish("ready");
        else if (reply.type === "failed" && reply.id === undefined) finish(this.#failure(reply.message));
      };
      const onError = (error: Error): void => finish(this.#ending("", endingOf(error)));
      const onExit = (): void =>
        finish(this.#ending("", { kind: "failed", message: "the checker's worker stopped" }));
      const timer = setTimeout(
        () => finish(checkLimitDiagnostic("", `${this.#startTimeoutMs} ms to load the module's types`)),
        this.#startTimeoutMs,
      );
      worker.on("message", onMessage);
      worker.on("error", onError);
      worker.on("exit", onExit);
    });
    // Errors after a check settled (the worker dying while idle) must never reach the host as uncaught.
    worker.on("error", () => this.#end(started));
    worker.on("exit", () => this.#end(started));
    this.#started = started;
    return started;
  }

  #armIdleTimer(): void {
    clearTimeout(this.#idleTimer);
    if (!this.#started) return;
    this.#idleTimer = setTimeout(() => void this.dispose(), this.#idleTimeoutMs);
    this.#idleTimer.unref();
  }

  #post(request: CheckWorkerRequest): void {
    const started = this.#started;
    if (!started) return;
    // Sent once the worker is ready (it reads accepted snippets from its start data before that).
    void started.ready.then((ready) => {
      if (ready === "ready" && this.#started === started) started.worker.postMessage(request);
    });
  }

  #end(started: Started): void {
    if (this.#started === started) this.#started = undefined;
    void started.worker.terminate().catch(() => {});
  }

  #ending(snippet: string, ending: Ending): Diagnostic {
    return ending.kind === "memory"
      ? checkLimitDiagnostic(snippet, `${Math.round(this.#memoryLimitBytes / MEBIBYTE)} MiB of memory`)
      : this.#failure(ending.message);
  }

  /** A failure of the checker itself (not the model's fault): a warning, the code was not checked. */
  #failure(message: string): Diagnostic {
    const shown = scrubMessage(message.slice(0, MAX_FAILURE_LENGTH), {
      moduleDirectory: path.dirname(this.#options.modulePath),
      virtualFiles: [],
      hiddenNames: new Set(this.#options.hiddenNames),
      shownNames: new Set(),
    });
    return {
      code: MOSS_DIAGNOSTIC_CODES.checkerFailed,
      message: `the type checker failed on this snippet (${shown}); the code was not type-checked.`,
      line: 1,
      column: 1,
      severity: "warning",
    };
  }
}

/** A limit diagnostic made before the snippet was known is located in the snippet once it is. */
function located(snippet: string): Partial<Diagnostic> {
  const limit = checkLimitDiagnostic(snippet, "");
  return { line: limit.line, column: limit.column, frame: limit.frame };
}

function endingOf(error: Error): Ending {
  return (error as { code?: string }).code === "ERR_WORKER_OUT_OF_MEMORY"
    ? { kind: "memory" }
    : { kind: "failed", message: error.message };
}

function positive(value: number | undefined, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : fallback;
}
