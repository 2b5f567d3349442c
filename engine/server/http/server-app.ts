import { Hono } from "hono";
import { cors } from "hono/cors";
import { streamSSE } from "hono/streaming";
import { checkMetadataSize } from "../answer-bounds.ts";
import { ServerError } from "../server-error.ts";
import { type EventHub, type ServerStore, threadNotFound } from "../store/index.ts";
import type { TenantTokens } from "../tenant-tokens.ts";
import { registerAguiRoute } from "./agui/agui-route.ts";
import { checkEventKnown, eventId } from "./event-cursor.ts";
import { followThreadEvents } from "./follow-thread-events.ts";
import { registerPlayground } from "./playground/playground-route.ts";
import { readJson } from "./read-json-body.ts";
import { runImages } from "./run-images.ts";
import { checkRequestText } from "./text-input.ts";

/** Limits of one tenant. */
export interface TenantLimits {
  /** Runs queued, running or waiting for a person at once (more is 429 `too-many-runs`). */
  maxActiveRuns: number;
  /** Bytes of a request body (more is 413 `body-too-large`). */
  maxBodyBytes: number;
}

/** The limits every tenant gets unless configured otherwise. */
export const DEFAULT_TENANT_LIMITS: Readonly<TenantLimits> = Object.freeze({
  maxActiveRuns: 100,
  maxBodyBytes: 1_048_576,
});

/** Options of {@link createServerApp}. */
export interface ServerAppOptions {
  store: ServerStore;
  tokens: TenantTokens;
  events: EventHub;
  version: string;
  limits?: Partial<TenantLimits>;
  /** Limits of particular tenants, over `limits`. */
  tenantLimits?: Record<string, Partial<TenantLimits>>;
  /** Period of the comment lines that keep an idle event stream open. Default 15 000. */
  heartbeatMs?: number;
  /** Web origins (`https://app.example`) whose pages may call the API from a browser (CORS); none by default. */
  corsOrigins?: readonly string[];
  /** The state `GET /health` reports (the database, the worker); `ok` false answers 503. */
  health?: () => Promise<{ ok: boolean; body: Record<string, unknown> }>;
}

/** The app and a way to end the event streams it has open (a draining server closes them). */
export interface ServerApp {
  app: Hono<{ Variables: { tenant: string } }>;
  closeStreams(): void;
}

const THREAD_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

/** The native HTTP API v1 (see docs/07-server.md): threads, runs, answers, cancel and the stored event stream. */
export function createServerApp(options: ServerAppOptions): ServerApp {
  const { store, tokens, events } = options;
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const limitsOf = (tenant: string): TenantLimits => ({
    ...DEFAULT_TENANT_LIMITS,
    ...options.limits,
    ...options.tenantLimits?.[tenant],
  });
  const openStreams = new Set<() => void>();
  const app = new Hono<{ Variables: { tenant: string } }>();

  app.onError((error, c) => {
    if (error instanceof ServerError) {
      if (error.status === 401) c.header("WWW-Authenticate", 'Bearer realm="moss"');
      return c.json(error.toJSON(), error.status);
    }
    process.emitWarning(`moss serve: ${c.req.method} ${c.req.path}: ${error.stack ?? error.message}`);
    return c.json(
      {
        error: {
          code: "internal",
          message: "The server failed on this request; it is logged on the server.",
        },
      },
      500,
    );
  });
  app.notFound((c) =>
    c.json({ error: { code: "not-found", message: `No route ${c.req.method} ${c.req.path}.` } }, 404),
  );

  if (options.corsOrigins !== undefined && options.corsOrigins.length > 0) {
    // Before the token check: a browser's preflight carries no Authorization header.
    const allowed = cors({
      origin: [...options.corsOrigins],
      allowMethods: ["GET", "POST", "DELETE", "OPTIONS"],
      allowHeaders: ["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID", "Accept"],
      maxAge: 600,
    });
    app.use("/v1/*", allowed);
    app.use("/health", allowed);
  }
  app.get("/health", async (c) => {
    const state = await options.health?.();
    return c.json(
      {
        status: state === undefined || state.ok ? "ok" : "degraded",
        version: options.version,
        ...state?.body,
      },
      state === undefined || state.ok ? 200 : 503,
    );
  });
  registerPlayground(app);

  app.use("/v1/*", async (c, next) => {
    const tenant = tokens.tenantOf(c.req.header("authorization"));
    if (tenant === undefined) {
      throw new ServerError(
        401,
        "unauthorized",
        c.req.header("authorization") === undefined
          ? "This request needs an Authorization: Bearer <token> header."
          : "The bearer token is not one this server knows.",
      );
    }
    c.set("tenant", tenant);
    await next();
  });
  // Path segments and query parameters of every route: text the server can store, or 400 naming it.
  app.use("/v1/*", checkRequestText);

  app.post("/v1/threads", async (c) => {
    const body = await readJson(c, limitsOf(c.get("tenant")).maxBodyBytes, true);
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

  app.delete("/v1/threads/:threadId", async (c) => {
    await store.deleteThread(c.get("tenant"), threadId(c.req.param("threadId")));
    return c.body(null, 204);
  });

  app.post("/v1/threads/:threadId/runs", async (c) => {
    const tenant = c.get("tenant");
    const id = threadId(c.req.param("threadId"));
    const body = await readJson(c, limitsOf(tenant).maxBodyBytes, false);
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
      maxActiveRuns: limitsOf(tenant).maxActiveRuns,
      ...(images.length === 0 ? {} : { images }),
    });
    return c.json({ run }, 202);
  });

  app.get("/v1/threads/:threadId/runs/:runId", async (c) => {
    const id = threadId(c.req.param("threadId"));
    const run = await store.requireRun(c.get("tenant"), id, c.req.param("runId"));
    return c.json({ run });
  });

  app.post("/v1/threads/:threadId/runs/:runId/cancel", async (c) => {
    const id = threadId(c.req.param("threadId"));
    const run = await store.cancelRun(c.get("tenant"), id, c.req.param("runId"));
    return c.json({ run }, 202);
  });

  app.post("/v1/threads/:threadId/answers", async (c) => {
    const tenant = c.get("tenant");
    const id = threadId(c.req.param("threadId"));
    const body = await readJson(c, limitsOf(tenant).maxBodyBytes, false);
    const answers = body.answers;
    if (
      typeof answers !== "object" ||
      answers === null ||
      Array.isArray(answers) ||
      Object.keys(answers).length === 0
    ) {
      throw new ServerError(
        400,
        "answers-invalid",
        'The body needs "answers": an object mapping request ids to answers, e.g. {"answers": {"r2-3fa9c1b2d4e5": {"approved": true}}}.',
      );
    }
    // The run the answers were given for (optional): answers for any other run apply to nothing.
    const runId = optionalField(body, "runId", "string") as string | undefined;
    const key = c.req.header("idempotency-key");
    if (key !== undefined && (key.length === 0 || key.length > 200)) {
      throw new ServerError(400, "idempotency-key-invalid", "Idempotency-Key must be 1 to 200 characters.");
    }
    const response = await store.answer(tenant, id, answers as Record<string, unknown>, key, runId);
    return c.json(response.body, response.status as 202);
  });

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
        { store, events, tenant, threadId: id, after, streams: openStreams, heartbeatMs },
        async (event) => {
          await stream.writeSSE({
            id: String(event.id),
            event: event.type,
            data: JSON.stringify(event.data),
          });
          return false;
        },
      ),
    );
  });

  registerAguiRoute(app, {
    store,
    events,
    heartbeatMs,
    streams: openStreams,
    maxActiveRuns: (tenant) => limitsOf(tenant).maxActiveRuns,
    maxBodyBytes: (tenant) => limitsOf(tenant).maxBodyBytes,
  });

  return {
    app,
    closeStreams() {
      for (const close of [...openStreams]) close();
    },
  };
}

function optionalField(body: Record<string, unknown>, name: string, type: "string" | "object"): unknown {
  const value = body[name];
  if (value === undefined) return undefined;
  const fits =
    type === "object"
      ? typeof value === "object" && value !== null && !Array.isArray(value)
      : typeof value === type;
  if (!fits)
    throw new ServerError(
      400,
      `${name}-invalid`,
      `"${name}" must be ${type === "object" ? "an object" : "a string"}.`,
    );
  return value;
}

function threadId(id: string): string {
  if (!THREAD_ID.test(id)) {
    throw new ServerError(
      400,
      "thread-id-invalid",
      `A thread id is 1 to 128 letters, digits, _ . : or - (starting with a letter or digit), got "${id.slice(0, 140)}".`,
    );
  }
  return id;
}

function integerQuery(
  text: string | undefined,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ServerError(
      400,
      "query-invalid",
      `?${name} must be an integer from ${min} to ${max}, got "${text}".`,
    );
  }
  return value;
}
