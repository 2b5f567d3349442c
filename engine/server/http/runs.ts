// `/v1/threads/:threadId/runs`: queue a run of the user's message, read a run and its trace, cancel one.
import { Hono } from "hono";
import { ServerError } from "../server-error.ts";
import type { ServerStore } from "../store/index.ts";
import { readJson } from "./read-json-body.ts";
import { type ApiEnv, integerQuery, threadId } from "./request-checks.ts";
import { runImages } from "./run-images.ts";

/** What the runs resource needs of the app. */
export interface RunRoutesOptions {
  store: ServerStore;
  maxBodyBytes(tenant: string): number;
  maxActiveRuns(tenant: string): number;
}

export function runRoutes(options: RunRoutesOptions): Hono<ApiEnv> {
  const { store } = options;
  const app = new Hono<ApiEnv>();

  app.post("/v1/threads/:threadId/runs", async (c) => {
    const tenant = c.get("tenant");
    const id = threadId(c.req.param("threadId"));
    const body = await readJson(c, options.maxBodyBytes(tenant), false);
    const message = body.message;
    if (typeof message !== "string" || message.trim() === "") {
      throw new ServerError(
        400,
        "message-invalid",
        'The body needs "message": the user\'s message, a non-empty string.',
      );
    }
    const images = runImages(body.images);
    const run = await store.createRun(tenant, id, message, {
      maxActiveRuns: options.maxActiveRuns(tenant),
      ...(images.length === 0 ? {} : { images }),
    });
    return c.json({ run }, 202);
  });

  app.get("/v1/threads/:threadId/runs/:runId", async (c) => {
    const id = threadId(c.req.param("threadId"));
    const run = await store.requireRun(c.get("tenant"), id, c.req.param("runId"));
    return c.json({ run });
  });

  // The host calls of each execution of the run (see `RunTrace`), a page bounded in bytes at a time.
  app.get("/v1/threads/:threadId/runs/:runId/trace", async (c) => {
    const id = threadId(c.req.param("threadId"));
    const after = integerQuery(c.req.query("after"), "after", 0, 0, 2_147_483_647);
    return c.json(await store.runTrace(c.get("tenant"), id, c.req.param("runId"), after));
  });

  app.post("/v1/threads/:threadId/runs/:runId/cancel", async (c) => {
    const id = threadId(c.req.param("threadId"));
    const run = await store.cancelRun(c.get("tenant"), id, c.req.param("runId"));
    return c.json({ run }, 202);
  });

  return app;
}
