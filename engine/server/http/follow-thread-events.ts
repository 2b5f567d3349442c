import type { SSEStreamingApi } from "hono/streaming";
import { EVENT_PAGE_BYTES } from "../answer-bounds.ts";
import type { EventHub, ServerStore, StoredEvent } from "../store/index.ts";

/** Stored events read per query while a stream catches up (and at most EVENT_PAGE_BYTES of them). */
const EVENT_PAGE = 500;

/** Bytes of stored events each open stream holds in memory, read and not yet handed to its socket. */
const heldBytes = new Map<symbol, number>();
let written = 0;

/**
 * The bytes of stored events the open event streams of this process hold now (read from the database, not yet
 * written to their sockets): at most EVENT_PAGE_BYTES (or one event) per stream, however slow its reader.
 */
export function streamHeldBytes(): { streams: number; bytes: number; largest: number; written: number } {
  const sizes = [...heldBytes.values()];
  return {
    written,
    streams: sizes.length,
    bytes: sizes.reduce((sum, size) => sum + size, 0),
    largest: Math.max(0, ...sizes),
  };
}

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
  const key = Symbol(threadId);
  heldBytes.set(key, 0);
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
      const { events: page, more } = await store.eventPage(
        tenant,
        threadId,
        cursor,
        EVENT_PAGE,
        EVENT_PAGE_BYTES,
      );
      const sizes = page.map((event) => event.bytes);
      let held = sizes.reduce((sum, size) => sum + size, 0);
      heldBytes.set(key, held);
      for (const [index, event] of page.entries()) {
        if (closed) break;
        // Each write waits until the socket took the previous one (backpressure): a reader that does not read
        // holds this page and no more.
        const done = await onEvent(event);
        held -= sizes[index]!;
        written += 1;
        heldBytes.set(key, held);
        cursor = event.id;
        if (done === true) closed = true;
      }
      heldBytes.set(key, 0);
      if (more) dirty = true;
      // Nothing new after a wake: the thread may have been deleted (its streams end; a reconnect is 404).
      else if (page.length === 0 && (await store.lastEventId(tenant, threadId)) === undefined) closed = true;
    }
  } finally {
    clearInterval(heartbeat);
    heldBytes.delete(key);
    unsubscribe();
    options.streams.delete(close);
    await stream.close().catch(() => {});
  }
}
