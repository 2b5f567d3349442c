// `/v1/threads`: create (or find) a thread, list the tenant's threads, read what one does now, rename (its
// metadata), delete one.
import { Hono } from "hono";
import { checkMetadataSize } from "../answer-bounds.ts";
import { ServerError } from "../server-error.ts";
import { type ServerStore, threadNotFound } from "../store/index.ts";
import { readJson } from "./read-json-body.ts";
import { type ApiEnv, integerQuery, optionalField, threadId } from "./request-checks.ts";

/** What the threads resource needs of the app. */
export interface ThreadRoutesOptions {
  store: ServerStore;
  maxBodyBytes(tenant: string): number;
}

export function threadRoutes(options: ThreadRoutesOptions): Hono<ApiEnv> {
  const { store } = options;
  const app = new Hono<ApiEnv>();

  app.post("/v1/threads", async (c) => {
    const body = await readJson(c, options.maxBodyBytes(c.get("tenant")), true);
    const id = optionalField(body, "id", "string") as string | undefined;
    if (id !== undefined) threadId(id);
    const metadata = optionalField(body, "metadata", "object") as Record<string, unknown> | undefined;
    checkMetadataSize(metadata);
    const { thread, created } = await store.createThread(c.get("tenant"), id, metadata);
    return c.json({ thread }, created ? 201 : 200);
  });

  app.get("/v1/threads", async (c) => {
    const limit = integerQuery(c.req.query("limit"), "limit", 50, 1, 500);
    const before = c.req.query("before");
    const page = await store.listThreadPage(c.get("tenant"), limit, before);
    return c.json({ threads: page.threads, ...(page.next === undefined ? {} : { next: page.next }) });
  });

  app.get("/v1/threads/:threadId", async (c) => {
    const id = threadId(c.req.param("threadId"));
    const state = await store.threadState(c.get("tenant"), id);
    if (state === undefined) throw threadNotFound(id);
    return c.json(state);
  });

  app.patch("/v1/threads/:threadId", async (c) => {
    const tenant = c.get("tenant");
    const id = threadId(c.req.param("threadId"));
    const body = await readJson(c, options.maxBodyBytes(tenant), false);
    const metadata = optionalField(body, "metadata", "object") as Record<string, unknown> | undefined;
    if (metadata === undefined) {
      throw new ServerError(
        400,
        "metadata-invalid",
        'The body needs "metadata": an object that replaces the thread\'s metadata, e.g. {"metadata": {"title": "Groceries"}}.',
      );
    }
    checkMetadataSize(metadata);
    return c.json({ thread: await store.updateThread(tenant, id, metadata) });
  });

  app.delete("/v1/threads/:threadId", async (c) => {
    await store.deleteThread(c.get("tenant"), threadId(c.req.param("threadId")));
    return c.body(null, 204);
  });

  return app;
}
