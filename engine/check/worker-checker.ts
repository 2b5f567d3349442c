import { createHash } from "node:crypto";
import { availableParallelism } from "node:os";
import path from "node:path";
import type { Worker } from "node:worker_threads";
import { MOSS_DIAGNOSTIC_CODES } from "../diagnostic-codes.ts";
import { MossError } from "../errors.ts";
import type { Diagnostic } from "../types.ts";
import type { CheckWorkerData, CheckWorkerReply, CheckWorkerRequest } from "./check-worker.ts";
import {
  checkWorkerEntry,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_TYPE_CHECK_MEMORY_BYTES,
  endSpareCheckWorker,
  spareCheckWorkers,
  startCheckWorker,
  startSpareCheckWorker,
  takeSpareCheckWorker,
  terminateCheckWorker,
} from "./check-worker-start.ts";
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
export { DEFAULT_TYPE_CHECK_MEMORY_BYTES };

const DEFAULT_START_TIMEOUT_MS = 60_000;
const MEBIBYTE = 1024 * 1024;
/** Most snippets replayed into a fresh worker (the newest; older definitions are usually redefined by then). */
const MAX_ACCEPTED = 256;
/** How often a queued check past its deadline looks again while a worker loads (the load moves the deadline on). */
const LOADING_RECHECK_MS = 50;
/** Longest text of a worker failure shown in a diagnostic. */
const MAX_FAILURE_LENGTH = 500;

interface Started {
  worker: Worker;
  ready: Promise<"ready" | Diagnostic>;
}

type Ending = { kind: "memory" } | { kind: "failed"; message: string };

/** A check asked of a module's worker, waiting for it or running. */
interface QueuedCheck {
  owner: string;
  snippet: string;
  /** Its result's key (accepted definitions and snippet). */
  key: string;
  /** Time the check itself may take once its worker is ready. */
  timeoutMs: number;
  /** When its execute must have the answer (`performance.now()` clock; infinite: no deadline), and that time limit. */
  deadline: number;
  deadlineMs: number;
  /** The module's loading time when it was asked: time a worker loads after that moves its deadline on. */
  loadedAtAsk: number;
  resolve: (diagnostics: Diagnostic[]) => void;
  timer?: NodeJS.Timeout;
}

/** Bounds of the type-check workers shared by every checker of this process. */
export interface CheckerPoolOptions {
  /** Most type-check workers alive at once (one per module being checked); the least recently used idle one ends to make room. Default: the number of cores, at least 2. */
  maxWorkers?: number;
  /** Most checks waiting for one module's worker; one more is refused with `queue-full`. Default 1000. */
  maxQueuedChecks?: number;
}

const DEFAULT_MAX_QUEUED_CHECKS = 1_000;

/** The per-module checkers of this process and the bound on their workers. */
class CheckerPool {
  maxWorkers = Math.max(2, availableParallelism());
  maxQueuedChecks = DEFAULT_MAX_QUEUED_CHECKS;
  readonly #byKey = new Map<string, SharedChecker>();
  #waiting: Array<() => void> = [];
  /** The deadlines of the checks waiting for room (room goes to the earliest). */
  readonly #asking = new Set<{ deadline: () => number }>();

  /** The shared checker of a module (same path, source, hidden names, locals' types and memory limit). */
  attach(options: Omit<ModuleCheckerOptions, "project">, limits: SharedCheckerLimits): SharedChecker {
    const key = createHash("sha256")
      .update(
        JSON.stringify([
          options.modulePath,
          options.source,
          [...(options.hiddenNames ?? [])].sort(),
          Object.entries(options.locals ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
          limits.memoryLimitBytes,
        ]),
      )
      .digest("base64url");
    let shared = this.#byKey.get(key);
    if (shared === undefined) {
      shared = new SharedChecker(this, key, options, limits);
      this.#byKey.set(key, shared);
    }
    return shared;
  }

  /** A checker with no session left is gone (its worker ends). */
  detached(shared: SharedChecker): void {
    if (this.#byKey.get(shared.key) === shared) this.#byKey.delete(shared.key);
  }

  /**
   * Waits until a new worker may start: below the bound, or once the spare or the least recently used idle worker
   * ended. Waiters take room in the order of their deadlines (earliest first); one whose deadline passes first gives
   * up: resolves false.
   */
  async room(deadline: () => number = () => Number.POSITIVE_INFINITY): Promise<boolean> {
    const asking = { deadline };
    this.#asking.add(asking);
    try {
      for (;;) {
        const mine = deadline();
        const left = mine - performance.now();
        if (left <= 0) return false;
        // Room goes to the waiter whose execute ends first; the others wait for the next release.
        const first = [...this.#asking].every((other) => other === asking || other.deadline() >= mine);
        if (first) {
          const running = [...this.#byKey.values()].filter((shared) => shared.hasWorker);
          if (running.length + spareCheckWorkers() < this.maxWorkers) return true;
          if (spareCheckWorkers() > 0) {
            endSpareCheckWorker();
            continue;
          }
          const idle = running
            .filter((shared) => !shared.checking)
            .sort((a, b) => a.lastUsed - b.lastUsed)[0];
          if (idle !== undefined) {
            await idle.endWorker();
            continue;
          }
        }
        let timer: NodeJS.Timeout | undefined;
        await new Promise<void>((resolve) => {
          this.#waiting.push(resolve);
          if (Number.isFinite(left)) timer = setTimeout(resolve, left);
        });
        clearTimeout(timer);
      }
    } finally {
      this.#asking.delete(asking);
      // The next waiter in deadline order may go on (once this one's worker counts, if it got room).
      setImmediate(() => this.released());
    }
  }

  /** A worker finished a check or ended: someone waiting for room may go on. */
  released(): void {
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const resolve of waiting) resolve();
  }

  /** Whether a new worker may start now without ending another one. */
  get hasFreeRoom(): boolean {
    return this.liveWorkers < this.maxWorkers;
  }

  /** Process ids are not a thing for workers: the number of live workers, a spare included (for tests and the bench). */
  get liveWorkers(): number {
    return [...this.#byKey.values()].filter((shared) => shared.hasWorker).length + spareCheckWorkers();
  }
}

interface SharedCheckerLimits {
  memoryLimitBytes: number;
  startTimeoutMs: number;
  idleTimeoutMs: number;
}

const pool = new CheckerPool();

/** Sets the bounds of the process's shared type-check workers (unset fields keep their value); returns the previous ones. */
export function configureCheckerPool(options: CheckerPoolOptions): Required<CheckerPoolOptions> {
  const previous = { maxWorkers: pool.maxWorkers, maxQueuedChecks: pool.maxQueuedChecks };
  if (options.maxWorkers !== undefined) pool.maxWorkers = Math.max(1, Math.floor(options.maxWorkers));
  if (options.maxQueuedChecks !== undefined)
    pool.maxQueuedChecks = Math.max(1, Math.floor(options.maxQueuedChecks));
  return previous;
}

/**
 * Starts a type-check worker before any module needs it, if the pool has room without ending another worker: it
 * loads TypeScript and its lib, and the next module whose checker starts a worker takes it. Resolves once started.
 */
export function warmCheckerPool(
  options: Pick<WorkerModuleCheckerOptions, "memoryLimitBytes" | "idleTimeoutMs"> = {},
): Promise<void> {
  return startSpareCheckWorker({ ...options, maxWorkers: pool.maxWorkers, liveWorkers: pool.liveWorkers });
}

/** How many type-check workers this process runs now (tests and the bench). */
export function liveCheckerWorkers(): number {
  return pool.liveWorkers;
}

/**
 * One module's checker, shared by every session of that module: one worker holds one warm program with the module
 * and each session's accepted definitions (kept apart by owner). Checks run one at a time; one that runs out of time
 * or memory ends the worker, and the next check starts a fresh one with every session's definitions.
 */
class SharedChecker {
  readonly key: string;
  readonly #pool: CheckerPool;
  readonly #options: Omit<ModuleCheckerOptions, "project">;
  readonly #limits: SharedCheckerLimits;
  /** The sessions using this checker, each with the snippets it accepted (replayed into a fresh worker). */
  readonly #owners = new Map<string, string[]>();
  /** A digest of everything each session accepted, in order: checks of equal digests see equal definitions. */
  readonly #acceptedDigests = new Map<string, string>();
  /**
   * Definitions each session accepted since the running worker started, not yet sent: they go with that session's
   * next check, so executes that are not checked never message the worker.
   */
  readonly #undelivered = new Map<string, string[]>();
  /** Definitions an owner set (`define`) since the running worker started, not yet sent: they go first, replacing. */
  readonly #defined = new Map<string, string>();
  /** Diagnostics of completed checks by digest of (accepted definitions, snippet), least recently used first. */
  readonly #results = new Map<string, Diagnostic[]>();
  #started: Started | undefined;
  /** Checks waiting for this module's worker, earliest deadline first. */
  readonly #queued: QueuedCheck[] = [];
  #running = false;
  /** Time this module's workers spent loading (TypeScript, the module's program): a check's deadline does not run meanwhile. */
  #loadedMs = 0;
  #loadingSince: number | undefined;
  #loadingDepth = 0;
  #pending = 0;
  #idleTimer: NodeJS.Timeout | undefined;
  #nextId = 1;
  lastUsed = 0;

  constructor(
    pool: CheckerPool,
    key: string,
    options: Omit<ModuleCheckerOptions, "project">,
    limits: SharedCheckerLimits,
  ) {
    this.#pool = pool;
    this.key = key;
    this.#options = { ...options, hiddenNames: [...(options.hiddenNames ?? [])] };
    this.#limits = limits;
  }

  get hasWorker(): boolean {
    return this.#started !== undefined;
  }

  get checking(): boolean {
    return this.#pending > 0;
  }

  join(owner: string, accepted: readonly string[]): void {
    this.#owners.set(owner, [...accepted]);
    this.#acceptedDigests.set(owner, accepted.reduce(nextDigest, ""));
    if (this.#started !== undefined) this.#undelivered.set(owner, [...accepted]);
  }

  leave(owner: string): void {
    if (!this.#owners.delete(owner)) return;
    this.#acceptedDigests.delete(owner);
    this.#undelivered.delete(owner);
    this.#defined.delete(owner);
    this.#post({ type: "forget", owner });
    if (this.#owners.size === 0) {
      this.#pool.detached(this);
      void this.endWorker();
    }
  }

  /** Starts the worker ahead of the first check (its program takes a while to build), if that ends no other worker. */
  prime(): void {
    if (this.#started !== undefined || this.#pending > 0) return;
    void this.#start({ evict: false }).catch(() => {});
  }

  accept(owner: string, snippet: string): void {
    const accepted = this.#owners.get(owner);
    if (accepted === undefined) return;
    accepted.push(snippet);
    if (accepted.length > MAX_ACCEPTED) accepted.shift();
    this.#acceptedDigests.set(owner, nextDigest(this.#acceptedDigests.get(owner) ?? "", snippet));
    // A worker that started has the definitions of its start data; later ones go with this owner's next check.
    if (this.#started === undefined) return;
    const undelivered = this.#undelivered.get(owner) ?? [];
    undelivered.push(snippet);
    if (undelivered.length > MAX_ACCEPTED) undelivered.shift();
    this.#undelivered.set(owner, undelivered);
  }

  /** Sets an owner's definitions to `definitions` alone (replayed into a fresh worker; sent with its next check). */
  define(owner: string, definitions: string): void {
    if (!this.#owners.has(owner)) return;
    this.#owners.set(owner, [definitions]);
    this.#acceptedDigests.set(owner, nextDigest("", definitions));
    this.#undelivered.delete(owner);
    if (this.#started !== undefined) this.#defined.set(owner, definitions);
  }

  check(
    owner: string,
    snippet: string,
    timeoutMs: number,
    deadline?: { at: number; ms: number },
  ): Promise<Diagnostic[]> {
    // The same snippet against the same definitions has the same diagnostics (sessions of one module often send
    // the same code): answered without the worker.
    const key = nextDigest(this.#acceptedDigests.get(owner) ?? "", snippet);
    const known = this.#results.get(key);
    if (known !== undefined) {
      this.#results.delete(key);
      this.#results.set(key, known);
      this.lastUsed = performance.now();
      return Promise.resolve(structuredClone(known));
    }
    if (this.#pending >= this.#pool.maxQueuedChecks) {
      return Promise.reject(
        new MossError(
          "queue-full",
          `the type checker of ${path.basename(this.#options.modulePath)} has ${this.#pending} checks waiting (the limit, maxQueuedChecks); try again later`,
          { pending: this.#pending },
        ),
      );
    }
    clearTimeout(this.#idleTimer);
    this.#pending++;
    this.lastUsed = performance.now();
    return new Promise<Diagnostic[]>((resolve) => {
      const entry: QueuedCheck = {
        owner,
        snippet,
        key,
        timeoutMs,
        deadline: deadline?.at ?? Number.POSITIVE_INFINITY,
        deadlineMs: deadline?.ms ?? Number.POSITIVE_INFINITY,
        loadedAtAsk: this.#loaded(),
        resolve,
      };
      // Earliest deadline first (equal deadlines in the order asked).
      const index = this.#queued.findIndex((queued) => queued.deadline > entry.deadline);
      this.#queued.splice(index === -1 ? this.#queued.length : index, 0, entry);
      this.#watch(entry);
      this.#pump();
    });
  }

  /** Time this module's workers spent loading so far (a load under way counts up to now). */
  #loaded(): number {
    return this.#loadedMs + (this.#loadingSince === undefined ? 0 : performance.now() - this.#loadingSince);
  }

  /** When a check must have its answer: its execute's deadline, moved by the time a worker loaded since it was asked. */
  #deadlineOf(entry: QueuedCheck): number {
    return entry.deadline + this.#loaded() - entry.loadedAtAsk;
  }

  /** Counts the time a worker takes to load (not against any check's deadline; bounded by `startTimeoutMs`). */
  async #loading<T>(work: Promise<T>): Promise<T> {
    if (this.#loadingDepth++ === 0) this.#loadingSince = performance.now();
    try {
      return await work;
    } finally {
      if (--this.#loadingDepth === 0 && this.#loadingSince !== undefined) {
        this.#loadedMs += performance.now() - this.#loadingSince;
        this.#loadingSince = undefined;
      }
    }
  }

  /** A queued check whose deadline passes before it reaches the worker fails then, never later. */
  #watch(entry: QueuedCheck): void {
    const left = this.#deadlineOf(entry) - performance.now();
    if (!Number.isFinite(left)) return;
    entry.timer = setTimeout(
      () => {
        const index = this.#queued.indexOf(entry);
        if (index === -1) return;
        // A worker loaded meanwhile: the deadline moved on.
        if (this.#deadlineOf(entry) > performance.now()) return this.#watch(entry);
        this.#queued.splice(index, 1);
        entry.resolve([
          this.#lateDiagnostic(entry, "waiting for the module's type checker, busy with other checks"),
        ]);
        this.#checked();
      },
      // While a worker loads the deadline moves on as fast as the clock: look again a little later, not at once.
      Math.max(this.#loadingSince === undefined ? 0 : LOADING_RECHECK_MS, left),
    );
  }

  /** Runs the earliest-deadline check when the worker is free. */
  #pump(): void {
    if (this.#running) return;
    const entry = this.#queued.shift();
    if (entry === undefined) return;
    clearTimeout(entry.timer);
    this.#running = true;
    void this.#checkNow(entry)
      .catch((error: unknown) => [this.failure(error instanceof Error ? error.message : String(error))])
      .then((diagnostics) => {
        this.#running = false;
        entry.resolve(diagnostics);
        this.#checked();
        this.#pump();
      });
  }

  /** A check was answered (or gave up): an idle worker may be ended to make room. */
  #checked(): void {
    this.lastUsed = performance.now();
    if (--this.#pending === 0) {
      this.#armIdleTimer();
      this.#pool.released();
    }
  }

  /** The limit error of a check that could not be answered by its execute's deadline. */
  #lateDiagnostic(entry: QueuedCheck, reason: string): Diagnostic {
    return {
      ...checkLimitDiagnostic(entry.snippet, ""),
      message: `the type-check could not finish within its execute's time limit (${entry.deadlineMs} ms; ${reason}): the code was not checked. Run it again, or with a longer wallTimeMs.`,
    };
  }

  /** Keeps a completed check's diagnostics (never a limit or failure: those depend on the moment). */
  #remember(key: string, diagnostics: Diagnostic[]): void {
    this.#results.set(key, structuredClone(diagnostics));
    if (this.#results.size > MAX_REMEMBERED_CHECKS) this.#results.delete(this.#results.keys().next().value!);
  }

  /** Ends the worker; a later check starts a new one. */
  async endWorker(): Promise<void> {
    clearTimeout(this.#idleTimer);
    const started = this.#started;
    this.#started = undefined;
    if (started) await terminateCheckWorker(started.worker);
    this.#pool.released();
  }

  async #checkNow(entry: QueuedCheck): Promise<Diagnostic[]> {
    const { owner, snippet, key } = entry;
    let started: Started | undefined;
    try {
      started = await this.#start({ deadline: () => this.#deadlineOf(entry) });
    } catch (error) {
      return [this.failure(error instanceof Error ? error.message : String(error))];
    }
    if (started === undefined) {
      return [
        this.#lateDiagnostic(
          entry,
          `waiting for a type-check worker: all ${this.#pool.maxWorkers} (maxWorkers) were busy`,
        ),
      ];
    }
    // A worker's load is not the check's time (its deadline moves on meanwhile); startTimeoutMs bounds it.
    const ready = await this.#loading(started.ready);
    if (ready !== "ready") {
      return [ready.code === MOSS_DIAGNOSTIC_CODES.checkLimit ? { ...ready, ...located(snippet) } : ready];
    }
    // The check runs within its own limit and whatever is left of its execute's time, whichever ends first.
    const left = this.#deadlineOf(entry) - performance.now();
    if (left <= 0) return [this.#lateDiagnostic(entry, "waiting for the module's type checker")];
    const byDeadline = left < entry.timeoutMs;
    const timeoutMs = byDeadline ? left : entry.timeoutMs;
    const id = this.#nextId++;
    const worker = started.worker;
    const defined = this.#defined.get(owner);
    if (defined !== undefined) worker.postMessage({ type: "define", owner, definitions: defined });
    this.#defined.delete(owner);
    for (const accepted of this.#undelivered.get(owner) ?? []) {
      worker.postMessage({ type: "accept", owner, snippet: accepted } satisfies CheckWorkerRequest);
    }
    this.#undelivered.delete(owner);
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
        if (reply.type === "checked" && reply.id === id) {
          this.#remember(key, reply.diagnostics);
          finish(reply.diagnostics, false);
        } else if (reply.type === "failed" && reply.id === id) finish([this.failure(reply.message)], true);
      };
      const onError = (error: Error): void => {
        finish([this.#ending(snippet, endingOf(error))], true);
      };
      const onExit = (): void => {
        finish([this.#ending(snippet, { kind: "failed", message: "the checker's worker stopped" })], true);
      };
      // Past it, the worker is ended (a fresh one takes the next check): a bomb never holds the checks behind it.
      const timer = setTimeout(
        () =>
          finish([checkLimitDiagnostic(snippet, `${byDeadline ? entry.deadlineMs : timeoutMs} ms`)], true),
        timeoutMs,
      );
      worker.on("message", onMessage);
      worker.on("error", onError);
      worker.on("exit", onExit);
      worker.postMessage({ type: "check", id, owner, snippet } satisfies CheckWorkerRequest);
    });
  }

  /** The module's worker, started if need be; undefined when the deadline passed while waiting for room. */
  async #start(options: { evict?: boolean; deadline?: () => number } = {}): Promise<Started | undefined> {
    if (this.#started) return this.#started;
    const entry = await this.#loading(checkWorkerEntry());
    if (this.#started) return this.#started;
    let worker = takeSpareCheckWorker(this.#limits.memoryLimitBytes);
    if (worker !== undefined) {
      worker.postMessage({ type: "start", data: this.#startData() } satisfies CheckWorkerRequest);
    } else {
      if (options.evict === false && !this.#pool.hasFreeRoom) throw new Error("no room for a worker");
      if (!(await this.#pool.room(options.deadline))) return undefined;
      if (this.#started) return this.#started;
      worker = startCheckWorker(entry, this.#startData(), this.#limits.memoryLimitBytes);
    }
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
        else if (reply.type === "failed" && reply.id === undefined) finish(this.failure(reply.message));
      };
      const onError = (error: Error): void => finish(this.#ending("", endingOf(error)));
      const onExit = (): void =>
        finish(this.#ending("", { kind: "failed", message: "the checker's worker stopped" }));
      const timer = setTimeout(
        () =>
          finish(checkLimitDiagnostic("", `${this.#limits.startTimeoutMs} ms to load the module's types`)),
        this.#limits.startTimeoutMs,
      );
      timer.unref();
      worker.on("message", onMessage);
      worker.on("error", onError);
      worker.on("exit", onExit);
    });
    // Errors after a check settled (the worker dying while idle) must never reach the host as uncaught.
    worker.on("error", () => this.#end(started));
    worker.on("exit", () => this.#end(started));
    this.#started = started;
    if (this.#pending === 0) this.#armIdleTimer();
    return started;
  }

  /** What a new worker starts with: the module and every session's accepted definitions (none left to send). */
  #startData(): CheckWorkerData {
    this.#undelivered.clear();
    this.#defined.clear();
    return {
      options: this.#options,
      accepted: [...this.#owners].map(([owner, snippets]) => [owner, [...snippets]]),
    };
  }

  #armIdleTimer(): void {
    clearTimeout(this.#idleTimer);
    if (!this.#started) return;
    this.#idleTimer = setTimeout(() => void this.endWorker(), this.#limits.idleTimeoutMs);
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
    void terminateCheckWorker(started.worker);
    this.#pool.released();
  }

  #ending(snippet: string, ending: Ending): Diagnostic {
    return ending.kind === "memory"
      ? checkLimitDiagnostic(snippet, `${Math.round(this.#limits.memoryLimitBytes / MEBIBYTE)} MiB of memory`)
      : this.failure(ending.message);
  }

  /** A failure of the checker itself (not the model's fault): a warning, the code was not checked. */
  failure(message: string): Diagnostic {
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

let nextOwner = 1;

/** Most check results one module's checker remembers. */
const MAX_REMEMBERED_CHECKS = 512;

/** The digest of a sequence after one more text (texts are delimited, so no two sequences share a digest). */
function nextDigest(digest: string, text: string): string {
  return createHash("sha256")
    .update(digest)
    .update("\0")
    .update(String(text.length))
    .update("\0")
    .update(text)
    .digest("base64url");
}

/**
 * Type-checks the model's snippets like `ModuleChecker`, in a worker thread with its own heap and time limits,
 * so that checking (model-controlled work: a few lines of recursive types can take seconds and a gigabyte) never
 * blocks the host's event loop. Checkers of the same module (same source, hidden names and locals' types) share one
 * worker and its warm program, bounded per process (`configureCheckerPool`); each keeps its own accepted
 * definitions. A check that runs out of time or memory ends that worker and comes back as a located `type` error;
 * the next check starts a fresh worker with the same module and every checker's accepted snippets.
 */
export class WorkerModuleChecker {
  readonly #options: Omit<ModuleCheckerOptions, "project">;
  readonly #limits: SharedCheckerLimits;
  readonly #timeoutMs: number;
  readonly #owner = `session-${nextOwner++}`;
  readonly #accepted: string[] = [];
  #shared: SharedChecker;
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
    this.#limits = {
      memoryLimitBytes: positive(memoryLimitBytes, DEFAULT_TYPE_CHECK_MEMORY_BYTES),
      startTimeoutMs: positive(startTimeoutMs, DEFAULT_START_TIMEOUT_MS),
      idleTimeoutMs: positive(idleTimeoutMs, DEFAULT_IDLE_TIMEOUT_MS),
    };
    this.#shared = pool.attach(this.#options, this.#limits);
    this.#shared.join(this.#owner, []);
  }

  /** Starts the module's worker now, so the first check does not wait for its program to build. */
  prime(): void {
    if (!this.#disposed) this.#shared.prime();
  }

  /**
   * Type-checks a snippet in the worker; one check at a time, each within the time limit (or `timeoutMs`) once its
   * worker is ready. `deadlineMs` (e.g. the wall time of the execute that asks), counted from `startedAt` (a
   * `performance.now()` time, e.g. the execute's start; default now), bounds everything else too: waiting for the
   * module's worker (checks wait in deadline order) and for room in the pool; past it the check fails with a limit
   * error (a running check ends its worker, which is replaced for the next). The time a new worker takes to load is
   * not counted against it (`startTimeoutMs` bounds that).
   */
  check(
    snippet: string,
    options: { timeoutMs?: number; deadlineMs?: number; startedAt?: number } = {},
  ): Promise<Diagnostic[]> {
    if (typeof snippet !== "string") {
      return Promise.reject(
        new MossError(
          "invalid-argument",
          `WorkerModuleChecker.check needs the snippet text, got ${typeof snippet}`,
        ),
      );
    }
    if (this.#disposed) return Promise.reject(new MossError("runtime-closed", "this checker is closed", {}));
    const deadlineMs = positive(options.deadlineMs, Number.POSITIVE_INFINITY);
    const startedAt = Number.isFinite(options.startedAt) ? options.startedAt! : performance.now();
    const deadline = Number.isFinite(deadlineMs) ? { at: startedAt + deadlineMs, ms: deadlineMs } : undefined;
    return this.#shared.check(this.#owner, snippet, positive(options.timeoutMs, this.#timeoutMs), deadline);
  }

  /** Remembers a snippet that ran: its top-level definitions are visible to this checker's later checks. */
  accept(snippet: string): void {
    this.#accepted.push(snippet);
    if (this.#accepted.length > MAX_ACCEPTED) this.#accepted.shift();
    this.#shared.accept(this.#owner, snippet);
  }

  /**
   * Sets this checker's definitions to `definitions` alone: the session's kept definitions, the same record its
   * sandbox is built from (what earlier `accept`/`define` calls gave is forgotten).
   */
  define(definitions: string): void {
    this.#accepted.length = 0;
    this.#accepted.push(definitions);
    this.#shared.define(this.#owner, definitions);
  }

  /** The module's code changed: later checks see the new source (with the checkers of that source). */
  updateSource(source: string): void {
    if (this.#disposed || source === this.#options.source) return;
    this.#options.source = source;
    this.#shared.leave(this.#owner);
    this.#shared = pool.attach(this.#options, this.#limits);
    this.#shared.join(this.#owner, this.#accepted);
  }

  /** Ends the module's worker (every checker of the module shares it); a later check starts a new one. */
  async dispose(): Promise<void> {
    await this.#shared.endWorker();
  }

  /** Ends this checker for good: later checks are refused; the shared worker ends with its last checker. */
  async close(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#shared.leave(this.#owner);
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
