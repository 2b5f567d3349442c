import { DEFAULT_LIMITS } from "../types.ts";
import { type ExecutionThread, IsolateSession, memoryLimitMebibytes } from "./isolate-session.ts";

const SUCCESSOR_DELAY_MS = 20;

/** Keeps one bootstrapped isolate ready per memory limit, so opening a session skips isolate start-up. */
export class WarmIsolates {
  readonly #thread: ExecutionThread;
  readonly #ready = new Map<number, Promise<IsolateSession>>();
  #closed = false;

  constructor(thread: ExecutionThread) {
    this.#thread = thread;
  }

  /** Starts warming an isolate (default memory limit unless given); resolves once it is ready. */
  async prime(memoryLimit = memoryLimitMebibytes(DEFAULT_LIMITS.memoryLimitBytes)): Promise<void> {
    if (!this.#ready.has(memoryLimit)) this.#ready.set(memoryLimit, this.#create(memoryLimit));
    await this.#ready.get(memoryLimit);
  }

  /** Takes the warm isolate for this limit (or makes one) and starts warming its successor. */
  async take(memoryLimit: number): Promise<IsolateSession> {
    const ready = this.#ready.get(memoryLimit);
    this.#ready.delete(memoryLimit);
    if (!this.#closed) this.#ready.set(memoryLimit, this.#createSoon(memoryLimit));
    const session = ready === undefined ? undefined : await ready.catch(() => undefined);
    return session?.alive ? session : this.#create(memoryLimit);
  }

  /** Disposes the warm isolates. */
  async close(): Promise<void> {
    this.#closed = true;
    const ready = [...this.#ready.values()];
    this.#ready.clear();
    for (const session of await Promise.all(ready.map((promise) => promise.catch(() => undefined))))
      session?.dispose();
  }

  /** Warms the successor a moment later, so it does not compete with the session just handed out. */
  #createSoon(memoryLimit: number): Promise<IsolateSession> {
    const promise = new Promise<void>((resolve) => setTimeout(resolve, SUCCESSOR_DELAY_MS).unref()).then(() =>
      this.#create(memoryLimit),
    );
    promise.catch(() => {});
    return promise;
  }

  #create(memoryLimit: number): Promise<IsolateSession> {
    const promise = IsolateSession.create({
      memoryLimitBytes: memoryLimit * 1024 * 1024,
      thread: this.#thread,
    });
    promise.catch(() => {});
    return promise;
  }
}
