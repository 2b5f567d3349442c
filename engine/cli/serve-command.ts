import { join, resolve } from "node:path";
import type { LanguageModel } from "../model/index.ts";
import type { DatabaseLocation } from "../server/index.ts";
import type { LogLevel } from "../server-defaults.ts";
import type { CliCommand, CliIo } from "./cli-io.ts";
import { ConfigSettings } from "./config-settings.ts";
import { EXIT, usageError } from "./exit-codes.ts";
import { loadMossConfig, type MossConfig } from "./moss-config.ts";
import { mossPackageVersion } from "./moss-package.ts";
import { parseOptions } from "./parse-options.ts";
import { settingOptions, settingsUsage } from "./settings.ts";

const CONFIG_HELP = `  --config <file>         the configuration (default ./moss.config.yaml when it exists): model, agent, limits, store,
                          serve, worker, tokens, modules.<module.ts>.config and .host (its host setup file, relative
                          to the config file); flags and environment variables win over it
  --print-config          print every setting in effect with where it came from, and exit
Paused runs are signed with $MOSS_CONTINUATION_KEY, else a key kept in the database (the same for every instance).
Every setting, its key in moss.config.yaml and its environment variable: docs/reference/settings.md.`;

const SERVE_USAGE = `Usage: moss serve <module.ts> [--port <n>] [--host <addr>] [--data-dir <dir>] [--database-url <url>] [options]

Serves agents of the context module over HTTP (the native API v1, see docs/07-server.md): threads, runs, answers, cancel
and a stored event stream over SSE. Prints a line with http://<host>:<port> when ready; SIGTERM drains and stops.
  --no-worker             serve HTTP only; runs are executed by \`moss worker\` processes on the same database
${settingsUsage("serve")}
${CONFIG_HELP}`;

const WORKER_USAGE = `Usage: moss worker <module.ts> --database-url <url> [options]

Executes the runs queued by \`moss serve\` instances on the same database, without HTTP: claims a run with a lease,
keeps it with heartbeats, and takes over the runs of workers that died. SIGTERM drains and stops.
${settingsUsage("worker")}
${CONFIG_HELP}`;

/** `moss serve`'s own option besides its settings' flags. */
const SERVE_ONLY = { "no-worker": { type: "boolean" } } as const;

/**
 * The options both commands parse: `moss worker` knows serve's too, to say that they belong to `moss serve` rather
 * than that they are unknown.
 */
const SERVER_OPTIONS = { ...settingOptions("serve"), ...SERVE_ONLY };

/** The flags of `moss serve` that `moss worker` refuses. */
const NOT_WORKER = [
  ...Object.keys(SERVE_ONLY),
  ...Object.keys(settingOptions("serve")).filter((flag) => !(flag in settingOptions("worker"))),
];

/** `moss serve <module.ts>`: the HTTP API and a worker, on PGlite (default) or PostgreSQL. */
export const serveCommand: CliCommand = (argv, io) => runServer("serve", argv, io);

/** `moss worker <module.ts>`: a worker without HTTP. */
export const workerCommand: CliCommand = (argv, io) => runServer("worker", argv, io);

async function runServer(kind: "serve" | "worker", argv: string[], io: CliIo): Promise<number> {
  const usage = kind === "serve" ? SERVE_USAGE : WORKER_USAGE;
  const { values, positionals } = parseOptions(argv, SERVER_OPTIONS, usage);
  if (values.help) {
    io.stdout.write(`${usage}\n`);
    return EXIT.ok;
  }
  if (kind === "worker") {
    for (const name of NOT_WORKER) {
      if ((values as Record<string, unknown>)[name] !== undefined)
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
  const settings = new ConfigSettings(config, values, io.env, usage, kind);
  const databaseUrl = settings.get<string>("store.databaseUrl");
  const dataDir = settings.get<string>("store.dataDir")!;
  const modelName = settings.get<string>("model.name");
  const baseUrl = settings.get<string>("model.baseUrl");
  const maxTokens = settings.get<number>("model.maxTokens");
  const contextTokens = settings.get<number>("model.contextTokens");
  const maxSteps = settings.get<number>("agent.maxSteps")!;
  const maxErrors = settings.get<number>("agent.maxErrors")!;
  const tools = settings.get<boolean>("agent.tools")!;
  const tracePayloads = settings.get<boolean>("serve.tracePayloads")!;
  const concurrency = settings.get<number>("worker.concurrency")!;
  const leaseMs = settings.get<number>("worker.leaseMs")!;
  const maxRunsPerTenant = settings.get<number>("worker.maxRunsPerTenant");
  const maxTakeovers = settings.get<number>("worker.maxTakeovers")!;
  const logLevel = settings.get<LogLevel>("log.level")!;
  const http = kind === "serve" ? httpSettings(settings, config, usage) : false;
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
  // Said before the server loads; the entries themselves are read by the server's TenantTokens, loaded with it.
  if (http !== false && http.tokens.length === 0) {
    throw usageError(
      'moss serve needs at least one tenant token: --token <tenant>:<secret> (or MOSS_SERVE_TOKENS="a:s1,b:s2", or tokens in moss.config.yaml)',
      usage,
    );
  }
  // The model client alone, not the agent's front door: an idle server loads none of the engine that reads modules.
  const [{ startMossServer, redactUrl, createServerLogger, TenantTokens }, { OpenAILanguageModel }] =
    await Promise.all([import("../server/index.ts"), import("../agent/openai-language-model.ts")]);
  const tokens =
    http === false
      ? undefined
      : TenantTokens.parse(
          http.tokens.map(([token]) => token),
          "--token / MOSS_SERVE_TOKENS / tokens",
        );
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
    tracePayloads,
    http: http === false ? false : { ...http.listen, tokens: tokens! },
    worker:
      values["no-worker"] === true
        ? false
        : {
            leaseMs,
            concurrency,
            maxTakeovers,
            ...(maxRunsPerTenant === undefined ? {} : { maxRunsPerTenant }),
          },
    ...(http === false ? {} : { limits: http.limits, tenantLimits: http.tenantLimits }),
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

/**
 * The settings only `moss serve` reads: where it listens, its HTTP timeouts, its tenants' limits and tokens (not yet
 * parsed: `--print-config` shows them masked first) and the web origins allowed to call it.
 */
function httpSettings(settings: ConfigSettings, config: MossConfig, usage: string) {
  const listen = {
    port: settings.get<number>("serve.port")!,
    host: settings.get<string>("serve.host")!,
    headersTimeoutMs: settings.get<number>("serve.headersTimeoutMs")!,
    requestTimeoutMs: settings.get<number>("serve.requestTimeoutMs")!,
    corsOrigins: [] as string[],
  };
  const limits = {
    maxActiveRuns: settings.get<number>("limits.maxActiveRuns")!,
    maxBodyBytes: settings.get<number>("limits.maxBodyBytes")!,
  };
  const tenantLimits: Record<string, Record<string, number>> = {};
  for (const [path, entry] of config.entries("limits.tenants.")) {
    const [, , tenant, key] = path.split(".");
    (tenantLimits[tenant!] ??= {})[key!] = entry.value as number;
    settings.show(path, entry);
  }
  const tokens = settings.list("tokens");
  for (const [token, source] of tokens) {
    const tenant = token.split(":")[0];
    settings.show(`tokens.${tenant}`, { value: `${tenant}:***`, source });
  }
  for (const [origin, source] of settings.list("serve.corsOrigins")) {
    const parsed = URL.canParse(origin) ? new URL(origin) : undefined;
    if (origin !== "*" && (parsed === undefined || parsed.origin !== origin)) {
      throw usageError(
        `${source} needs a web origin like https://app.example (scheme, host, port; no path), or *, got "${origin}"`,
        usage,
      );
    }
    settings.show("serve.corsOrigins", { value: origin, source });
    listen.corsOrigins.push(origin);
  }
  return { listen, limits, tenantLimits, tokens };
}
