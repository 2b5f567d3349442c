import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { compileModuleRuntime, MossAgentOptions } from "../agent/index.ts";
import { MossError } from "../errors.ts";
import type { LanguageModel } from "../model/index.ts";
import type { MossRuntime } from "../runtime/index.ts";
import type { MossContext } from "../types.ts";
import {
  answerClientErrors,
  createServerApp,
  type HttpTimeouts,
  httpServerOptions,
  type TenantLimits,
} from "./http/index.ts";
import { isPlainData, proveModuleInProcess } from "./module-proof.ts";
import type { ThreadPrompt } from "./protocol.ts";
import { createServerLogger, loggedError, type ServerLogger } from "./server-log.ts";
import {
  type Database,
  DatabaseContextStore,
  DatabaseConversationStore,
  type DatabaseLocation,
  EventHub,
  openDatabase,
  ServerStore,
} from "./store/index.ts";
import type { TenantTokens } from "./tenant-tokens.ts";
import { TenantView } from "./tenant-view.ts";
import { type CreateThreadAgent, RunWorker, type RunWorkerOptions } from "./worker/index.ts";

/** The agent options a server passes to every thread's MossAgent. */
export type ServerAgentOptions = Omit<
  MossAgentOptions,
  "model" | "modulePath" | "sessionId" | "store" | "conversationStore" | "createRuntime"
>;

/** Options of {@link startMossServer}. */
export interface MossServerOptions {
  /** The context module every thread's agent works through. */
  modulePath: string;
  model: LanguageModel;
  /** PGlite under a data directory (default), or PostgreSQL. */
  database: DatabaseLocation;
  /** The HTTP API; false runs a worker only (`moss worker`). */
  http?:
    | ({
        port?: number;
        host?: string;
        tokens: TenantTokens;
        heartbeatMs?: number;
        /** Web origins whose pages may call the API from a browser (CORS). */
        corsOrigins?: readonly string[];
      } & Partial<HttpTimeouts>)
    | false;
  /** Runs claimed and executed in this process; false serves HTTP only. */
  worker?: Omit<RunWorkerOptions, "store" | "createAgent" | "conversationStore"> | false;
  agent?: ServerAgentOptions;
  limits?: Partial<TenantLimits>;
  tenantLimits?: Record<string, Partial<TenantLimits>>;
  /**
   * The module's `config` section (its own defaults under the outer file's overrides), bound in each compile's
   * container under the token `"moss.config"`.
   */
  moduleConfig?: Record<string, unknown>;
  /**
   * Whether runs' traces keep each host call's arguments, result and error (bounded, through the tenant view's
   * redactor; read with `GET /v1/threads/:threadId/runs/:runId/trace`). Default true; false keeps sizes only.
   */
  tracePayloads?: boolean;
  /** For `MOSS_CONTINUATION_KEY` (else the key shared through the database). */
  env?: NodeJS.ProcessEnv;
  version?: string;
  /** The operator's log (JSON lines). Default: warnings and errors to stderr. */
  logger?: ServerLogger;
  /**
   * Where the start proves that the module and its host setup load: `"process"` (the default) in a process of its
   * own that ends with the proof, so the idle server holds none of the engine that reads modules until the first run
   * or prompt; `"thread"` on the server's own thread, which then holds that engine (~160 MiB) from the start but
   * starts sooner and runs the module's top-level code and host setup once instead of twice. A server given a
   * `container` or compiler options that are not plain data proves it on its thread whatever this says.
   */
  moduleProof?: "process" | "thread";
  /**
   * Asks the model server after the start whether it answers (`GET /models`) and logs a warning when it does not
   * (the server serves anyway; see `MossServer.modelChecked`). Default true.
   */
  checkModel?: boolean;
}

/** A running `moss serve` (or `moss worker`). */
export interface MossServer {
  /** `http://<host>:<port>` of the API, when it serves HTTP. */
  url: string | undefined;
  database: Database;
  store: ServerStore;
  worker: RunWorker | undefined;
  /**
   * Settles once the start-up check of the model server has logged its outcome (it runs after the start, so a slow
   * or silent model server delays nothing).
   */
  modelChecked: Promise<void>;
  /** Stops taking requests and runs, lets runs in progress end (up to `drainMs`), then closes the database. */
  close(drainMs?: number): Promise<void>;
}

/** Opens the database, starts the worker and the HTTP API: the whole of `moss serve` without its command line. */
export async function startMossServer(options: MossServerOptions): Promise<MossServer> {
  // Bad timeouts are refused before anything is opened.
  const serverOptions = options.http === false ? undefined : httpServerOptions(options.http);
  const log = options.logger ?? createServerLogger("warn");
  // The tokenizer is not built here: its thread (about 130 MiB with o200k's ranks) starts with the first run's count
  // and builds it there, off the thread serving HTTP, so an idle server does not hold it.
  const database = await openDatabase(options.database);
  const env = options.env ?? process.env;
  // Every secret the server holds; the view also follows the module's bindings' secrets as they bind.
  const view = new TenantView([
    ...(options.model.operatorSecrets?.() ?? []),
    ...("url" in options.database ? [options.database.url] : []),
    ...(options.http === false || options.http === undefined ? [] : options.http.tokens.secrets()),
    env.MOSS_CONTINUATION_KEY,
  ]);
  const store = new ServerStore(database, view);
  const contexts = new DatabaseContextStore(database);
  const conversations = new DatabaseConversationStore(database);
  const continuationKey =
    env.MOSS_CONTINUATION_KEY !== undefined && env.MOSS_CONTINUATION_KEY.trim() !== ""
      ? env.MOSS_CONTINUATION_KEY
      : await store.continuationKey(randomBytes(32).toString("base64url"));
  view.addSecret(continuationKey);
  const moduleConfig = options.moduleConfig ?? {};
  // The engine that reads modules (the agent, the compiler, TypeScript) is loaded with a tenant's first request or
  // the first run or prompt, not with the server: an idle server holds none of it (module-proof.ts: the start's proof).
  const importEngine = async () => {
    const [agent, { ModuleCache }] = await Promise.all([
      import("../agent/index.ts"),
      import("../compiler/index.ts"),
    ]);
    // Every thread's runtime is compiled from one analysis and one loaded instance of the module (see ModuleCache).
    // A trace's payloads pass the one redactor of what tenants read before they are cut (and again when stored).
    const compiler = {
      ...options.agent?.compiler,
      continuationKey,
      moduleCache: new ModuleCache(),
      tracePayloads: options.tracePayloads === false ? false : { redact: (text: string) => view.text(text) },
    };
    return { agent, compiler };
  };
  let engine: ReturnType<typeof importEngine> | undefined;
  const loadEngine = () => (engine ??= importEngine());
  const compileRuntime = async (context: Parameters<typeof compileModuleRuntime>[1], startCheck = false) => {
    const { agent, compiler } = await loadEngine();
    return agent.compileModuleRuntime(
      {
        modulePath: options.modulePath,
        // A compile that only reads the module's surface (a prompt, the start's proof) keeps its check off: it starts
        // no type-check worker (~140 MiB with TypeScript's lib), which the first run starts when it needs one.
        compiler: startCheck ? { ...compiler, typeCheck: "off" as const } : compiler,
        ...(options.agent?.container === undefined ? {} : { container: options.agent.container }),
        ...(options.agent?.hostSetup === undefined ? {} : { hostSetup: options.agent.hostSetup }),
        inject: [["moss.config", moduleConfig]],
      },
      context,
    );
  };
  /**
   * A module or host setup that cannot load fails the start with its located error, not every run after it. The
   * proof runs in a process of its own where what it needs crosses a process boundary as plain data; a server given
   * a container or compiler options that are not (an embedding program's objects) proves it on its own thread.
   */
  const proveModule = async (): Promise<void> => {
    const compilerOptions = options.agent?.compiler ?? {};
    if (
      options.moduleProof !== "thread" &&
      options.agent?.container === undefined &&
      isPlainData(compilerOptions) &&
      isPlainData(moduleConfig)
    ) {
      await proveModuleInProcess({
        modulePath: options.modulePath,
        ...(options.agent?.hostSetup === undefined ? {} : { hostSetup: options.agent.hostSetup }),
        moduleConfig,
        compiler: { ...compilerOptions, continuationKey },
      });
      return;
    }
    await (await compileRuntime(undefined, true)).close();
  };
  const createAgent: CreateThreadAgent = async (sessionId, hooks) => {
    const { agent, compiler } = await loadEngine();
    return new agent.MossAgent({
      ...options.agent,
      compiler,
      model: options.model,
      createRuntime: async (context) => {
        const runtime = await compileRuntime(context);
        if (hooks?.onCheckpoint !== undefined) runtime.onCheckpoint(hooks.onCheckpoint);
        hooks?.onRuntime?.(runtime);
        return runtime;
      },
      sessionId,
      store: contexts,
      conversationStore: conversations,
    });
  };
  const prompt = threadPromptOf(compileRuntime, contexts, view, options.agent?.instructions);
  let worker: RunWorker | undefined;
  let events: EventHub | undefined;
  let http: import("node:http").Server | undefined;
  let closeStreams = () => {};
  let url: string | undefined;
  try {
    await proveModule();
    if (options.worker !== false) {
      worker = new RunWorker({
        logger: log,
        ...options.worker,
        store,
        createAgent,
        conversationStore: conversations,
      });
      await worker.start();
    }
    if (options.http !== false && options.http !== undefined) {
      events = new EventHub();
      await events.start(database);
      const served = createServerApp({
        store,
        tokens: options.http.tokens,
        events,
        version: options.version ?? "0.0.0",
        health: () => serverHealth(database, worker),
        prompt,
        // An idle server holds no engine; a tenant's first request starts loading it, in the background.
        onTenantRequest: () => {
          loadEngine().catch(() => {});
        },
        ...(options.limits === undefined ? {} : { limits: options.limits }),
        ...(options.tenantLimits === undefined ? {} : { tenantLimits: options.tenantLimits }),
        ...(options.http.heartbeatMs === undefined ? {} : { heartbeatMs: options.http.heartbeatMs }),
        ...(options.http.corsOrigins === undefined ? {} : { corsOrigins: options.http.corsOrigins }),
      });
      closeStreams = served.closeStreams;
      const { serve } = await import("@hono/node-server");
      const host = options.http.host ?? "127.0.0.1";
      const requestedPort = options.http.port ?? 8787;
      http = await new Promise<import("node:http").Server>((resolve, reject) => {
        const server = serve(
          { fetch: served.app.fetch, port: requestedPort, hostname: host, serverOptions },
          () => resolve(server as import("node:http").Server),
        ) as import("node:http").Server;
        server.once("error", (error) => reject(listenError(error, host, requestedPort)));
      });
      answerClientErrors(http, options.http);
      const { port } = http.address() as AddressInfo;
      url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
    }
  } catch (error) {
    await worker?.stop(0);
    await events?.stop();
    await database.close();
    throw error;
  }
  let closing: Promise<void> | undefined;
  // After the start: the caller prints its ready line first, and a model server that never answers holds nothing.
  const modelChecked =
    options.checkModel !== false && options.worker !== false
      ? new Promise<void>((resolve) => setImmediate(resolve)).then(() => checkModel(options.model, log))
      : Promise.resolve();
  return {
    url,
    database,
    store,
    worker,
    modelChecked,
    close(drainMs = 30_000) {
      closing ??= (async () => {
        const stopped =
          http === undefined
            ? Promise.resolve()
            : new Promise<void>((resolve) => http!.close(() => resolve()));
        closeStreams();
        http?.closeIdleConnections();
        await worker?.stop(drainMs);
        await stopped;
        await events?.stop();
        await database.close();
      })();
      return closing;
    },
  };
}

/**
 * The prompt of the module for a thread's session: a runtime compiled with the session's context (its `code` may
 * replace the module's source) renders it with the engine's one prompter, redacted; requests for the same source
 * while one renders share it.
 */
function threadPromptOf(
  compileRuntime: (context: MossContext | undefined, startCheck: boolean) => Promise<MossRuntime>,
  contexts: DatabaseContextStore,
  view: TenantView,
  instructions: string | undefined,
): (sessionId: string) => Promise<ThreadPrompt> {
  const rendering = new Map<string, Promise<ThreadPrompt>>();
  return async (sessionId) => {
    const context = await contexts.load(sessionId);
    const key = context?.code ?? "";
    let rendered = rendering.get(key);
    if (rendered === undefined) {
      rendered = (async () => {
        const runtime = await compileRuntime(context, true);
        try {
          return {
            module: view.text(runtime.modulePath),
            prompt: view.text(await runtime.prompter().dumpModulePrompt()),
            ...(instructions === undefined || instructions.trim() === ""
              ? {}
              : { instructions: view.text(instructions.trim()) }),
          };
        } finally {
          await runtime.close();
        }
      })().finally(() => rendering.delete(key));
      rendering.set(key, rendered);
    }
    return rendered;
  };
}

/** What `GET /health` reports: whether the database answers and what the worker does. */
async function serverHealth(
  database: Database,
  worker: RunWorker | undefined,
): Promise<{ ok: boolean; body: Record<string, unknown> }> {
  let databaseState: Record<string, unknown>;
  let timer: NodeJS.Timeout | undefined;
  try {
    // A database that does not answer in 2 s is as good as gone for a health check.
    await Promise.race([
      database.query("SELECT 1"),
      new Promise((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error("no answer in 2 s")), 2_000);
      }),
    ]);
    databaseState = { status: "ok" };
  } catch {
    databaseState = { status: "unreachable" };
  } finally {
    clearTimeout(timer);
  }
  const workerState =
    worker === undefined
      ? { status: "none" }
      : {
          status: worker.running ? "running" : "stopped",
          activeRuns: worker.activeRuns,
          concurrency: worker.concurrency,
        };
  const ok = databaseState.status === "ok" && (worker === undefined || worker.running);
  return { ok, body: { database: databaseState, worker: workerState } };
}

/**
 * Asks the model server whether it answers; a server that does not, or refuses the key, is a warning in the
 * operator's log (runs fail with `model-unavailable` until it does), never a failed start.
 */
async function checkModel(model: LanguageModel, log: ServerLogger): Promise<void> {
  if (model.probe === undefined) return;
  try {
    const problem = await model.probe();
    if (problem !== undefined) {
      log.warn({ event: "model-check", model: model.model, problem }, `the model server: ${problem}`);
    } else log.info({ event: "model-check", model: model.model }, "the model server answers");
  } catch (error) {
    log.warn(
      { event: "model-check", model: model.model, error: loggedError(error) },
      `the model server does not answer: runs will fail with model-unavailable until it does (${(error as Error).message})`,
    );
  }
}

/** Why the server could not listen, as MossError `invalid-argument` naming the address (a port in use, a host not here). */
function listenError(error: Error, host: string, port: number): Error {
  const code = (error as NodeJS.ErrnoException).code;
  const why: Record<string, string> = {
    EADDRINUSE: "another process listens there; choose another --port (0 picks a free one)",
    EADDRNOTAVAIL: "this machine has no such address; choose another --host",
    EACCES: "this user may not listen there (ports below 1024 need privileges); choose another --port",
  };
  const reason = code === undefined ? undefined : why[code];
  if (reason === undefined) return error;
  return new MossError(
    "invalid-argument",
    `cannot listen on ${host}:${port} (${code}): ${reason}`,
    { host, port, errno: code },
    { cause: error },
  );
}
