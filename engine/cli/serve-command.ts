import { join, resolve } from "node:path";
import type { LanguageModel } from "../agent/index.ts";
import { DEFAULT_HTTP_TIMEOUTS } from "../server/http/http-timeouts.ts";
import type { DatabaseLocation } from "../server/index.ts";
import { LOG_LEVELS } from "../server/log-levels.ts";
import { loadMossConfig } from "../server/moss-config.ts";
import { TenantTokens } from "../server/tenant-tokens.ts";
import { DEFAULT_MAX_TAKEOVERS } from "../server/worker-defaults.ts";
import type { CliCommand, CliIo } from "./cli-io.ts";
import { ConfigSettings, nonEmpty } from "./config-settings.ts";
import { EXIT, usageError } from "./exit-codes.ts";
import { mossPackageVersion } from "./moss-package.ts";
import { parseOptions } from "./parse-options.ts";

const COMMON = `  --data-dir <dir>        where the embedded database (PGlite) lives when there is no database URL (default .moss)
  --database-url <url>    PostgreSQL to share threads and runs with other instances (default $DATABASE_URL)
  --model <name>          model name (default $MOSS_MODEL, then gpt-4o-mini)
  --base-url <url>        OpenAI-compatible API root (default $OPENAI_BASE_URL, then the OpenAI API); key from $OPENAI_API_KEY
  --no-tools              ask for one fenced typescript block per answer instead of the moss tool
  --max-steps <n>         model calls per run before it stops (default 10)
  --max-errors <n>        failed steps in a row before a run stops (default 3)
  --max-tokens <n>        output tokens per model call (default $MOSS_MAX_TOKENS)
  --context-tokens <n>    the model's context size (default $MOSS_CONTEXT_TOKENS)
  --concurrency <n>       runs this process executes at once (default 8)
  --lease-ms <n>          how long a worker holds a run between heartbeats before another may take it over (default 30000)
  --max-runs-per-tenant <n>  runs one tenant may have running at once over all workers (default: no cap; runs are
                          claimed fairly among tenants with queued work either way)
  --max-takeovers <n>     times a run may be taken over from a lost worker before it fails without running again (default 3)
  --log-level <level>     the operator's log on stderr, JSON lines: fatal, error, warn, info, debug, trace or silent
                          (default $MOSS_LOG_LEVEL, then info)
  --config <file>         the configuration (default ./moss.config.yaml when it exists): model, agent, limits, store,
                          serve, worker, tokens, modules.<module.ts>.config and .host (its host setup file, relative
                          to the config file); flags and environment variables win over it
  --print-config          print every setting in effect with where it came from, and exit
Paused runs are signed with $MOSS_CONTINUATION_KEY, else a key kept in the database (the same for every instance).`;

const SERVE_USAGE = `Usage: moss serve <module.ts> [--port <n>] [--host <addr>] [--data-dir <dir>] [--database-url <url>] [options]

Serves agents of the context module over HTTP (the native API v1, see docs/07-server.md): threads, runs, answers, cancel
and a stored event stream over SSE. Prints a line with http://<host>:<port> when ready; SIGTERM drains and stops.
  --port <n>              TCP port (default 8787; 0 picks a free one)
  --host <addr>           address to listen on (default 127.0.0.1)
  --token <tenant:secret> a tenant's bearer token (repeatable; also $MOSS_SERVE_TOKENS="a:s1,b:s2")
  --max-active-runs <n>   runs a tenant may have queued, running or paused at once (default 100)
  --max-body-bytes <n>    largest request body (default 1048576)
  --headers-timeout-ms <n> time a client has to send a request's headers, else 408 (default 15000)
  --request-timeout-ms <n> time a client has to send a whole request with its body, else 408 (default 60000)
  --no-worker             serve HTTP only; runs are executed by \`moss worker\` processes on the same database
  --cors-origin <origin>  a web origin whose pages may call the API from a browser, e.g. https://app.example
                          (repeatable; also $MOSS_SERVE_CORS_ORIGINS="https://a.example,https://b.example")
${COMMON}`;

const WORKER_USAGE = `Usage: moss worker <module.ts> --database-url <url> [options]

Executes the runs queued by \`moss serve\` instances on the same database, without HTTP: claims a run with a lease,
keeps it with heartbeats, and takes over the runs of workers that died. SIGTERM drains and stops.
${COMMON}`;

const COMMON_OPTIONS = {
  "data-dir": { type: "string" },
  "database-url": { type: "string" },
  model: { type: "string" },
  "base-url": { type: "string" },
  "no-tools": { type: "boolean" },
  "max-steps": { type: "string" },
  "max-errors": { type: "string" },
  "max-tokens": { type: "string" },
  "context-tokens": { type: "string" },
  concurrency: { type: "string" },
  "lease-ms": { type: "string" },
  "max-runs-per-tenant": { type: "string" },
  "max-takeovers": { type: "string" },
  "log-level": { type: "string" },
  config: { type: "string" },
  "print-config": { type: "boolean" },
} as const;

const SERVE_OPTIONS = {
  ...COMMON_OPTIONS,
  port: { type: "string" },
  host: { type: "string" },
  token: { type: "string", multiple: true },
  "max-active-runs": { type: "string" },
  "max-body-bytes": { type: "string" },
  "headers-timeout-ms": { type: "string" },
  "request-timeout-ms": { type: "string" },
  "no-worker": { type: "boolean" },
  "cors-origin": { type: "string", multiple: true },
} as const;

/** `moss serve <module.ts>`: the HTTP API and a worker, on PGlite (default) or PostgreSQL. */
export const serveCommand: CliCommand = (argv, io) => runServer("serve", argv, io);

/** `moss worker <module.ts>`: a worker without HTTP. */
export const workerCommand: CliCommand = (argv, io) => runServer("worker", argv, io);

async function runServer(kind: "serve" | "worker", argv: string[], io: CliIo): Promise<number> {
  const usage = kind === "serve" ? SERVE_USAGE : WORKER_USAGE;
  const { values, positionals } = parseOptions(argv, SERVE_OPTIONS, usage);
  if (values.help) {
    io.stdout.write(`${usage}\n`);
    return EXIT.ok;
  }
  if (kind === "worker") {
    for (const name of [
      "port",
      "host",
      "token",
      "max-active-runs",
      "max-body-bytes",
      "headers-timeout-ms",
      "request-timeout-ms",
      "no-worker",
      "cors-origin",
    ] as const) {
      if (values[name] !== undefined)
        throw usageError(`--${name} is an option of moss serve, not moss worker`, usage);
    }
  }
  const [modulePath, ...extra] = positionals;
  if (!modulePath) throw usageError("missing <module.ts>", usage);
  if (extra.length > 0) throw usageError(`unexpected argument "${extra[0]}"`, usage);
  const config = await loadMossConfig({
    cwd: io.cwd,
    modulePath,
    ...(values.config === undefined ? {} : { file: values.config }),
  });
  const settings = new ConfigSettings(config, values, io.env, usage);
  const setting = settings.get.bind(settings);
  const integer = settings.integer.bind(settings);
  const text = (value: string) => value;
  const databaseUrl = setting("store.databaseUrl", "database-url", "DATABASE_URL", text);
  const dataDir = setting("store.dataDir", "data-dir", undefined, text, ".moss")!;
  const port = setting("serve.port", "port", undefined, integer(0, 65_535), 8787)!;
  const host = setting("serve.host", "host", undefined, text, "127.0.0.1")!;
  const headersTimeoutMs = setting(
    "serve.headersTimeoutMs",
    "headers-timeout-ms",
    undefined,
    integer(100),
    DEFAULT_HTTP_TIMEOUTS.headersTimeoutMs,
  )!;
  const requestTimeoutMs = setting(
    "serve.requestTimeoutMs",
    "request-timeout-ms",
    undefined,
    integer(100),
    DEFAULT_HTTP_TIMEOUTS.requestTimeoutMs,
  )!;
  const modelName = setting("model.name", "model", "MOSS_MODEL", text);
  const baseUrl = setting("model.baseUrl", "base-url", "OPENAI_BASE_URL", text);
  const maxTokens = setting("model.maxTokens", "max-tokens", "MOSS_MAX_TOKENS", integer(1));
  const contextTokens = setting("model.contextTokens", "context-tokens", "MOSS_CONTEXT_TOKENS", integer(1));
  const maxSteps = setting("agent.maxSteps", "max-steps", undefined, integer(1), 10)!;
  const maxErrors = setting("agent.maxErrors", "max-errors", undefined, integer(1), 3)!;
  const tools = setting("agent.tools", "no-tools", undefined, () => false, true)!;
  const concurrency = setting("worker.concurrency", "concurrency", undefined, integer(1), 8)!;
  const leaseMs = setting("worker.leaseMs", "lease-ms", undefined, integer(100), 30_000)!;
  const maxRunsPerTenant = setting("worker.maxRunsPerTenant", "max-runs-per-tenant", undefined, integer(1));
  const maxTakeovers = setting(
    "worker.maxTakeovers",
    "max-takeovers",
    undefined,
    integer(0),
    DEFAULT_MAX_TAKEOVERS,
  )!;
  const logLevel = setting(
    "log.level",
    "log-level",
    "MOSS_LOG_LEVEL",
    (value, source) => {
      if (!(LOG_LEVELS as readonly string[]).includes(value)) {
        throw usageError(`${source} must be one of ${LOG_LEVELS.join(", ")}, got "${value}"`, usage);
      }
      return value;
    },
    "info",
  )!;
  const maxActiveRuns = setting("limits.maxActiveRuns", "max-active-runs", undefined, integer(1), 100)!;
  const maxBodyBytes = setting("limits.maxBodyBytes", "max-body-bytes", undefined, integer(1), 1_048_576)!;
  const tenantLimits: Record<string, Record<string, number>> = {};
  for (const [path, entry] of config.entries("limits.tenants.")) {
    const [, , tenant, key] = path.split(".");
    (tenantLimits[tenant!] ??= {})[key!] = entry.value as number;
    settings.show(path, entry);
  }
  const tokenEntries: Array<[string, string]> = [
    ...(values.token ?? []).map((token): [string, string] => [token, "--token"]),
    ...TenantTokens.splitList(io.env.MOSS_SERVE_TOKENS).map((token): [string, string] => [
      token,
      "$MOSS_SERVE_TOKENS",
    ]),
    ...(config.get<string[]>("tokens") ?? []).map((token): [string, string] => [
      token,
      config.entry("tokens")!.source,
    ]),
  ];
  for (const [token, source] of tokenEntries) {
    const tenant = token.split(":")[0];
    settings.show(`tokens.${tenant}`, { value: `${tenant}:***`, source });
  }
  const corsOrigins = [
    ...(values["cors-origin"] ?? []).map((origin): [string, string] => [origin, "--cors-origin"]),
    ...(nonEmpty(io.env.MOSS_SERVE_CORS_ORIGINS) ?? "")
      .split(",")
      .map((origin) => origin.trim())
      .filter((origin) => origin !== "")
      .map((origin): [string, string] => [origin, "$MOSS_SERVE_CORS_ORIGINS"]),
  ].map(([origin, source]) => {
    const parsed = URL.canParse(origin) ? new URL(origin) : undefined;
    if (origin !== "*" && (parsed === undefined || parsed.origin !== origin)) {
      throw usageError(
        `${source} needs a web origin like https://app.example (scheme, host, port; no path), or *, got "${origin}"`,
        usage,
      );
    }
    settings.show("serve.corsOrigins", { value: origin, source });
    return origin;
  });
  settings.showModule(modulePath);

  if (values["print-config"] === true) {
    io.stdout.write(`${settings.render()}\n`);
    return EXIT.ok;
  }
  if (kind === "worker" && databaseUrl === undefined) {
    throw usageError(
      "moss worker needs --database-url (or $DATABASE_URL, or store.databaseUrl in moss.config.yaml): an embedded database belongs to its one moss serve",
      usage,
    );
  }
  const database: DatabaseLocation =
    databaseUrl !== undefined
      ? { url: databaseUrl }
      : { dataDirectory: join(resolve(io.cwd, dataDir), "pglite") };
  const tokens =
    kind === "serve"
      ? TenantTokens.parse(
          tokenEntries.map(([token]) => token),
          "--token / MOSS_SERVE_TOKENS / tokens",
        )
      : undefined;
  if (tokens !== undefined && tokens.size === 0) {
    throw usageError(
      'moss serve needs at least one tenant token: --token <tenant>:<secret> (or MOSS_SERVE_TOKENS="a:s1,b:s2", or tokens in moss.config.yaml)',
      usage,
    );
  }
  const [{ startMossServer }, { OpenAILanguageModel }, { redactUrl }, { createServerLogger }] =
    await Promise.all([
      import("../server/moss-server.ts"),
      import("../agent/openai-language-model.ts"),
      import("../server/store/database.ts"),
      import("../server/server-log.ts"),
    ]);
  const model: LanguageModel = new OpenAILanguageModel({
    env: io.env,
    ...(modelName === undefined ? {} : { model: modelName }),
    ...(baseUrl === undefined ? {} : { baseUrl }),
  });
  const server = await startMossServer({
    modulePath: resolve(io.cwd, modulePath),
    model,
    database,
    env: io.env,
    version: mossPackageVersion(),
    logger: createServerLogger(logLevel, io.stderr),
    moduleConfig: config.moduleConfig(),
    http:
      kind === "serve"
        ? { port, host, tokens: tokens!, corsOrigins, headersTimeoutMs, requestTimeoutMs }
        : false,
    worker:
      values["no-worker"] === true
        ? false
        : {
            leaseMs,
            concurrency,
            maxTakeovers,
            ...(maxRunsPerTenant === undefined ? {} : { maxRunsPerTenant }),
          },
    limits: { maxActiveRuns, maxBodyBytes },
    tenantLimits,
    agent: {
      ...(config.hostSetup() === undefined ? {} : { hostSetup: String(config.hostSetup()!.value) }),
      tools,
      maxSteps,
      maxConsecutiveErrors: maxErrors,
      ...(maxTokens === undefined ? {} : { maxTokens }),
      ...(contextTokens === undefined ? {} : { contextTokens }),
    },
  });
  const where =
    "url" in database ? `PostgreSQL ${redactUrl(database.url)}` : `PGlite ${database.dataDirectory}`;
  io.stdout.write(
    kind === "serve"
      ? `moss serve · ${server.url} · module ${modulePath} · ${where} · model ${model.model}\n`
      : `moss worker ${server.worker?.workerId} · module ${modulePath} · ${where} · model ${model.model}\n`,
  );
  await new Promise<void>((resolveStop) => {
    const stop = (signal: NodeJS.Signals) => {
      io.stderr.write(`moss ${kind}: ${signal}, draining (runs in progress may finish, up to 30 s)…\n`);
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
      resolveStop();
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  });
  await server.close(30_000);
  io.stderr.write(`moss ${kind}: stopped\n`);
  return EXIT.ok;
}
