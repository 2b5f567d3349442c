import type { SSEStreamingApi } from "hono/streaming";
import type { EventHub } from "./event-hub.ts";
import type { ServerStore, StoredEvent } from "./server-store.ts";

/** Stored events read per query while a stream catches up. */
const EVENT_PAGE = 500;

/** Where a stream follows a thread's stored events from, and what it shares with the server. */
export interface FollowThreadOptions {
  store: ServerStore;
  events: EventHub;
  tenant: string;
  threadId: string;
  /** The id of the last event the client has: the stream starts after it. */
  after: number;
  /** The server's open streams: a draining server closes each through the function added here. */
  streams: Set<() => void>;
  heartbeatMs: number;
}

/**
 * Follows a thread's stored events on an SSE stream, in id order from `options.after`, until `onEvent` answers
 * `true` (done), the client leaves or the thread is deleted: woken by the event hub when any instance stores an
 * event, read page by page, with comment heartbeats meanwhile. The one loop behind the native event stream and AG-UI.
 */
export async function followThreadEvents(
  stream: SSEStreamingApi,
  options: FollowThreadOptions,
  onEvent: (event: StoredEvent) => Promise<boolean | undefined>,
): Promise<void> {
  const { store, tenant, threadId } = options;
  let closed = false;
  let dirty = true;
  let wake: (() => void) | undefined;
  const poke = () => {
    dirty = true;
    wake?.();
  };
  const close = () => {
    closed = true;
    poke();
  };
  const unsubscribe = options.events.subscribe(tenant, threadId, poke);
  options.streams.add(close);
  stream.onAbort(close);
  const heartbeat = setInterval(() => {
    stream.write(": heartbeat\n\n").catch(close);
  }, options.heartbeatMs);
  try {
    let cursor = options.after;
    while (!closed) {
      if (!dirty) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      dirty = false;
      const page = await store.eventsAfter(tenant, threadId, cursor, EVENT_PAGE);
      for (const event of page) {
        if (closed) break;
        const done = await onEvent(event);
        cursor = event.id;
        if (done === true) closed = true;
      }
      if (page.length === EVENT_PAGE) dirty = true;
      // Nothing new after a wake: the thread may have been deleted (its streams end; a reconnect is 404).
      else if (page.length === 0 && (await store.lastEventId(tenant, threadId)) === undefined) closed = true;
    }
  } finally {
    clearInterval(heartbeat);
    unsubscribe();
    options.streams.delete(close);
    await stream.close().catch(() => {});
  }
}
