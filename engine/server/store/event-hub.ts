import type { Database } from "./database.ts";
import { CHANNELS } from "./store-rows.ts";

/**
 * Wakes the event streams of a thread when any process on the database stores an event of it (one LISTEN per
 * process, fanned out to the streams by thread).
 */
export class EventHub {
  readonly #subscribers = new Map<string, Set<() => void>>();
  #stop: (() => Promise<void>) | undefined;

  async start(database: Database): Promise<void> {
    this.#stop = await database.listen(CHANNELS.events, (payload) => {
      let tenant: unknown;
      let threadId: unknown;
      try {
        [tenant, threadId] = JSON.parse(payload) as unknown[];
      } catch {
        return;
      }
      for (const wake of this.#subscribers.get(key(String(tenant), String(threadId))) ?? []) wake();
    });
  }

  /** Calls `wake` whenever the thread has a new event; returns the unsubscribe function. */
  subscribe(tenant: string, threadId: string, wake: () => void): () => void {
    const name = key(tenant, threadId);
    let set = this.#subscribers.get(name);
    if (set === undefined) {
      set = new Set();
      this.#subscribers.set(name, set);
    }
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0) this.#subscribers.delete(name);
    };
  }

  async stop(): Promise<void> {
    await this.#stop?.();
    this.#stop = undefined;
  }
}

function key(tenant: string, threadId: string): string {
  return `${tenant}\n${threadId}`;
}
