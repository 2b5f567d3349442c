// What a thread's studio shows beside its events: the session's data fields now (`/session`), the prompt the model
// reads for the thread's module (`/prompt`) and the bytes of an image a message carries (`/messages/:id/images/:i`).
import { Hono } from "hono";
import { IMAGE_MEDIA_TYPES } from "../../image-content.ts";
import type { ThreadPrompt, ThreadSession } from "../protocol.ts";
import { ServerError } from "../server-error.ts";
import { ServerStore, threadNotFound } from "../store/index.ts";
import { type ApiEnv, threadId } from "./request-checks.ts";

/** What the thread views need of the app. */
export interface ThreadViewRoutesOptions {
  store: ServerStore;
  /** The prompt of the thread's module for its session (compiled with the session's context); absent: 503. */
  prompt?: ((sessionId: string) => Promise<ThreadPrompt>) | undefined;
}

/** Headers of an image's bytes: its stored type, never sniffed, never a document that runs anything. */
const IMAGE_HEADERS = {
  "x-content-type-options": "nosniff",
  "content-security-policy": "default-src 'none'; sandbox",
  "cache-control": "private, no-store",
};

export function threadViewRoutes(options: ThreadViewRoutesOptions): Hono<ApiEnv> {
  const { store } = options;
  const app = new Hono<ApiEnv>();
  /** The thread's id when it is the tenant's, else 404 `thread-not-found` (another tenant's thread is not there). */
  const tenantThread = async (tenant: string, id: string): Promise<string> => {
    if ((await store.getThread(tenant, threadId(id))) === undefined) throw threadNotFound(id);
    return id;
  };

  app.get("/v1/threads/:threadId/session", async (c) => {
    const tenant = c.get("tenant");
    const id = await tenantThread(tenant, c.req.param("threadId"));
    const last = await store.lastEventOfType(tenant, id, "session");
    const body: ThreadSession =
      last === undefined
        ? { fields: {} }
        : { fields: (last.data.fields ?? {}) as Record<string, string>, updatedAt: last.createdAt };
    return c.json(body);
  });

  app.get("/v1/threads/:threadId/prompt", async (c) => {
    const tenant = c.get("tenant");
    const id = await tenantThread(tenant, c.req.param("threadId"));
    if (options.prompt === undefined) {
      throw new ServerError(503, "prompt-unavailable", "This server does not render its module's prompt.");
    }
    return c.json(await options.prompt(ServerStore.sessionId(tenant, id)));
  });

  app.get("/v1/threads/:threadId/messages/:messageId/images/:index", async (c) => {
    const tenant = c.get("tenant");
    const id = await tenantThread(tenant, c.req.param("threadId"));
    const messageId = c.req.param("messageId");
    const indexText = c.req.param("index");
    const index = /^(0|[1-9][0-9]{0,2})$/.test(indexText) ? Number(indexText) : -1;
    const message = await store.storedMessage(tenant, id, messageId);
    if (message === undefined) {
      throw new ServerError(404, "message-not-found", `No message "${messageId}" in thread "${id}".`);
    }
    const image = (Array.isArray(message.images) ? message.images : [])[index] as
      | { mediaType?: unknown; data?: unknown }
      | undefined;
    if (image === undefined) {
      throw new ServerError(404, "image-not-found", `Message "${messageId}" has no image ${indexText}.`);
    }
    if (
      typeof image.data !== "string" ||
      typeof image.mediaType !== "string" ||
      !IMAGE_MEDIA_TYPES.includes(image.mediaType)
    ) {
      throw new ServerError(
        404,
        "image-not-stored",
        `Image ${index} of message "${messageId}" is a URL: the server keeps no bytes of it.`,
      );
    }
    const bytes = Buffer.from(image.data, "base64");
    return c.body(new Uint8Array(bytes), 200, { ...IMAGE_HEADERS, "content-type": image.mediaType });
  });

  return app;
}
