import { Hono } from "hono";
import { cors } from "hono/cors";
import { DEFAULT_TENANT_LIMITS, type TenantLimits } from "../../server-defaults.ts";
import type { ThreadPrompt } from "../protocol.ts";
import { ServerError } from "../server-error.ts";
import type { EventHub, ServerStore } from "../store/index.ts";
import type { TenantTokens } from "../tenant-tokens.ts";
import { registerAguiRoute } from "./agui/index.ts";
import { answerRoutes } from "./answers.ts";
import { eventRoutes } from "./events.ts";
import { registerPlayground } from "./playground/index.ts";
import type { ApiEnv } from "./request-checks.ts";
import { runRoutes } from "./runs.ts";
import { checkRequestText } from "./text-input.ts";
import { threadViewRoutes } from "./thread-views.ts";
import { threadRoutes } from "./threads.ts";

export type { TenantLimits } from "../../server-defaults.ts";

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
  /** The prompt of the module for a thread's session (`GET /v1/threads/:id/prompt`); absent: that route answers 503. */
  prompt?: (sessionId: string) => Promise<ThreadPrompt>;
  /** The state `GET /health` reports (the database, the worker); `ok` false answers 503. */
  health?: () => Promise<{ ok: boolean; body: Record<string, unknown> }>;
  /**
   * Called on each request a tenant's token let in: the server starts loading what runs need (the engine that reads
   * modules) with a tenant's first request rather than with its first run, so the run does not wait for it all.
   */
  onTenantRequest?: () => void;
}

/** The app and a way to end the event streams it has open (a draining server closes them). */
export interface ServerApp {
  app: Hono<ApiEnv>;
  closeStreams(): void;
}

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
  const app = new Hono<ApiEnv>();

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
      allowMethods: ["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
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
    options.onTenantRequest?.();
    await next();
  });
  // Path segments and query parameters of every route: text the server can store, or 400 naming it.
  app.use("/v1/*", checkRequestText);

  // The resources of the native API, each a sub-app (mounted after the checks above, which run first).
  const maxBodyBytes = (tenant: string) => limitsOf(tenant).maxBodyBytes;
  const maxActiveRuns = (tenant: string) => limitsOf(tenant).maxActiveRuns;
  app.route("/", threadRoutes({ store, maxBodyBytes }));
  app.route("/", runRoutes({ store, maxBodyBytes, maxActiveRuns }));
  app.route("/", answerRoutes({ store, maxBodyBytes }));
  app.route("/", eventRoutes({ store, events, heartbeatMs, streams: openStreams }));
  app.route("/", threadViewRoutes({ store, prompt: options.prompt }));

  registerAguiRoute(app, {
    store,
    events,
    heartbeatMs,
    streams: openStreams,
    maxActiveRuns,
    maxBodyBytes,
  });

  return {
    app,
    closeStreams() {
      for (const close of [...openStreams]) close();
    },
  };
}
