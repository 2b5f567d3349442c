// `/v1/threads/:threadId/events`: the thread's stored events as an SSE stream, from `Last-Event-ID` or `?after`.
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { type EventHub, type ServerStore, threadNotFound } from "../store/index.ts";
import { checkEventKnown, eventId } from "./event-cursor.ts";
import { followThreadEvents } from "./follow-thread-events.ts";
import { type ApiEnv, threadId } from "./request-checks.ts";

/** What the events resource needs of the app. */
export interface EventRoutesOptions {
  store: ServerStore;
  events: EventHub;
  heartbeatMs: number;
  /** The app's open streams: a draining server closes each. */
  streams: Set<() => void>;
}

export function eventRoutes(options: EventRoutesOptions): Hono<ApiEnv> {
  const { store, events, heartbeatMs, streams } = options;
  const app = new Hono<ApiEnv>();

  app.get("/v1/threads/:threadId/events", async (c) => {
    const tenant = c.get("tenant");
    const id = threadId(c.req.param("threadId"));
    const header = c.req.header("last-event-id");
    const query = c.req.query("after");
    const after =
      header !== undefined
        ? eventId(header, "Last-Event-ID")
        : query !== undefined
          ? eventId(query, "after")
          : 0;
    const last = await store.lastEventId(tenant, id);
    if (last === undefined) throw threadNotFound(id);
    checkEventKnown(after, last, id);
    return streamSSE(c, (stream) =>
      followThreadEvents(
        stream,
        { store, events, tenant, threadId: id, after, streams, heartbeatMs },
        async (event) => {
          await stream.writeSSE({
            id: String(event.id),
            event: event.type,
            // Streamed as stored: the data's JSON text as it was written.
            data: event.json,
          });
          return false;
        },
      ),
    );
  });

  return app;
}
