import { DEFAULT_LIMITS } from "../types.ts";
import { type ExecutionThread, IsolateSession, memoryLimitMebibytes } from "./isolate-session.ts";

const SUCCESSOR_DELAY_MS = 20;

/** Keeps one bootstrapped isolate ready per memory limit, so opening a session skips isolate start-up. */
export class WarmIsolates {
  readonly #thread: ExecutionThread;
  readonly #ready = new Map<number, Promise<IsolateSession>>();
  readonly #scheduled = new Map<number, NodeJS.Timeout>();
  #closed = false;

  constructor(thread: ExecutionThread) {
    this.#thread = thread;
  }

  /** Starts warming an isolate (default memory limit unless given); resolves once it is ready. */
  async prime(memoryLimit = memoryLimitMebibytes(DEFAULT_LIMITS.memoryLimitBytes)): Promise<void> {
    clearTimeout(this.#scheduled.get(memoryLimit));
    this.#scheduled.delete(memoryLimit);
    if (!this.#ready.has(memoryLimit)) this.#ready.set(memoryLimit, this.#create(memoryLimit));
    await this.#ready.get(memoryLimit);
  }

  /** Takes the warm isolate for this limit (or makes one) and schedules warming its successor. */
  async take(memoryLimit: number): Promise<IsolateSession> {
    const scheduled = this.#scheduled.get(memoryLimit);
    if (scheduled) {
      // Asked for before its warm-up was due: start it now rather than wait for the timer.
      clearTimeout(scheduled);
      this.#scheduled.delete(memoryLimit);
      this.#ready.set(memoryLimit, this.#create(memoryLimit));
    }
    const ready = this.#ready.get(memoryLimit);
    this.#ready.delete(memoryLimit);
    if (!this.#closed) this.#scheduleSuccessor(memoryLimit);
    const session = ready === undefined ? undefined : await ready.catch(() => undefined);
    return session?.alive ? session : this.#create(memoryLimit);
  }

  /** Disposes the warm isolates. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const timer of this.#scheduled.values()) clearTimeout(timer);
    this.#scheduled.clear();
    const ready = [...this.#ready.values()];
    this.#ready.clear();
    for (const session of await Promise.all(ready.map((promise) => promise.catch(() => undefined))))
      session?.dispose();
  }

  /** Warms the successor a moment later, so it does not compete with the session just handed out. */
  #scheduleSuccessor(memoryLimit: number): void {
    const timer = setTimeout(() => {
      this.#scheduled.delete(memoryLimit);
      if (!this.#closed && !this.#ready.has(memoryLimit))
        this.#ready.set(memoryLimit, this.#create(memoryLimit));
    }, SUCCESSOR_DELAY_MS);
    timer.unref();
    this.#scheduled.set(memoryLimit, timer);
  }

  #create(memoryLimit: number): Promise<IsolateSession> {
    // No run warms it further: the bootstrap's code cache already holds what a session runs (see
    // `IsolateSession.create`), and an empty run cost more CPU (~0.3 ms) than it saved the first execute (~0.1 ms).
    const promise = IsolateSession.create({
      memoryLimitBytes: memoryLimit * 1024 * 1024,
      thread: this.#thread,
    });
    promise.catch(() => {});
    return promise;
  }
}
