// The settings of `moss serve`, `moss worker` and `moss agent`, each written once: its key in moss.config.yaml, its
// flag, its environment variable, its kind and bounds, its default and its help. The commands' parseArgs options, the
// config file's schema (moss-config.ts), the usage text and docs/reference/settings.md are all made from this table
// (test/cli/settings.test.ts keeps the committed page equal to it), so none of them can name a flag or a default
// the others do not.

import {
  DEFAULT_CONCURRENCY,
  DEFAULT_HTTP_TIMEOUTS,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_TAKEOVERS,
  DEFAULT_TENANT_LIMITS,
  LOG_LEVELS,
} from "../server-defaults.ts";
import {
  DEFAULT_CONTEXT_TOKENS,
  DEFAULT_MAX_ERRORS,
  DEFAULT_MAX_STEPS,
  DEFAULT_MAX_TOKENS,
  DEFAULT_MODEL,
} from "../stop-reasons.ts";

/** The commands that read settings. */
export type SettingsCommand = "serve" | "worker" | "agent";

/** One setting. */
export interface Setting {
  /** Its dotted key in moss.config.yaml (`model.name`), and the name `--print-config` shows it under. */
  readonly path: string;
  /**
   * What it holds: text; an integer within `min`..`max`; `off`, a flag that turns on-by-default behaviour off
   * (`--no-tools`, `agent.tools: false` in the file); one of `choices`; a list (a repeatable flag, a
   * comma-separated environment variable and a list in the file, all of them together).
   */
  readonly kind: "string" | "integer" | "off" | "choice" | "list";
  /** Its flag without the dashes (`max-steps`). */
  readonly flag?: string;
  /** What the flag's value is called in the usage (`<n>`). */
  readonly argument?: string;
  /** Its environment variable, which a flag overrides and which overrides the file. */
  readonly env?: string;
  readonly min?: number;
  readonly max?: number;
  readonly choices?: readonly string[];
  /** The value when nothing sets it. */
  readonly default?: string | number | boolean;
  /** What applies when nothing sets it and there is no default value (`gpt-4o-mini`, chosen by the model client). */
  readonly otherwise?: string;
  /** One line of help; `{default}` marks where "default …" goes, else it is appended in parentheses. */
  readonly help: string;
  /** An example of the environment variable's value, for a list (`a:s1,b:s2`). */
  readonly envExample?: string;
  /** The commands it applies to. */
  readonly commands: readonly SettingsCommand[];
  /** The commands that take its flag, when fewer than {@link commands} (the others read it from the file only). */
  readonly flagIn?: readonly SettingsCommand[];
  /** False when moss.config.yaml may not set it (its path only names it in `--print-config`). */
  readonly inFile?: false;
  /** Also settable per tenant, under `limits.tenants.<tenant>.` in the file. */
  readonly perTenant?: true;
}

const SERVER: readonly SettingsCommand[] = ["serve", "worker"];
const EVERY: readonly SettingsCommand[] = ["serve", "worker", "agent"];

/** Every setting, in the order of moss.config.yaml's sections. */
export const SETTINGS: readonly Setting[] = [
  {
    path: "model.name",
    kind: "string",
    flag: "model",
    argument: "<name>",
    env: "MOSS_MODEL",
    otherwise: DEFAULT_MODEL,
    help: "model name",
    commands: EVERY,
  },
  {
    path: "model.baseUrl",
    kind: "string",
    flag: "base-url",
    argument: "<url>",
    env: "OPENAI_BASE_URL",
    otherwise: "the OpenAI API",
    help: "OpenAI-compatible API root ({default}); key from $OPENAI_API_KEY",
    commands: EVERY,
  },
  {
    path: "model.maxTokens",
    kind: "integer",
    min: 1,
    flag: "max-tokens",
    argument: "<n>",
    env: "MOSS_MAX_TOKENS",
    otherwise: `${DEFAULT_MAX_TOKENS}, at most a quarter of the context`,
    help: "output tokens per model call, sent as max_tokens",
    commands: EVERY,
  },
  {
    path: "model.contextTokens",
    kind: "integer",
    min: 1,
    flag: "context-tokens",
    argument: "<n>",
    env: "MOSS_CONTEXT_TOKENS",
    otherwise: `the server's n_ctx when it reports one (llama-server), then ${DEFAULT_CONTEXT_TOKENS}`,
    help: "the model's context size; older steps are shortened to fit",
    commands: EVERY,
  },
  {
    path: "agent.maxSteps",
    kind: "integer",
    min: 1,
    flag: "max-steps",
    argument: "<n>",
    default: DEFAULT_MAX_STEPS,
    help: "model calls per run before it stops",
    commands: EVERY,
  },
  {
    path: "agent.maxErrors",
    kind: "integer",
    min: 1,
    flag: "max-errors",
    argument: "<n>",
    default: DEFAULT_MAX_ERRORS,
    help: "failed steps in a row before a run stops",
    commands: EVERY,
  },
  {
    path: "agent.tools",
    kind: "off",
    flag: "no-tools",
    default: true,
    help: "ask for one fenced typescript block per answer instead of the moss tool",
    commands: EVERY,
  },
  {
    path: "limits.maxActiveRuns",
    kind: "integer",
    min: 1,
    flag: "max-active-runs",
    argument: "<n>",
    default: DEFAULT_TENANT_LIMITS.maxActiveRuns,
    help: "runs a tenant may have queued, running or paused at once",
    commands: ["serve"],
    perTenant: true,
  },
  {
    path: "limits.maxBodyBytes",
    kind: "integer",
    min: 1,
    flag: "max-body-bytes",
    argument: "<n>",
    default: DEFAULT_TENANT_LIMITS.maxBodyBytes,
    help: "largest request body",
    commands: ["serve"],
    perTenant: true,
  },
  {
    path: "store.dataDir",
    kind: "string",
    flag: "data-dir",
    argument: "<dir>",
    default: ".moss",
    help: "where the embedded database (PGlite) lives when there is no database URL",
    // Not moss worker's: a worker needs a database URL (an embedded database belongs to its one moss serve).
    commands: ["serve", "agent"],
    flagIn: ["serve"],
  },
  {
    path: "store.databaseUrl",
    kind: "string",
    flag: "database-url",
    argument: "<url>",
    env: "DATABASE_URL",
    help: "PostgreSQL to share threads and runs with other instances",
    commands: SERVER,
  },
  {
    path: "serve.port",
    kind: "integer",
    min: 0,
    max: 65_535,
    flag: "port",
    argument: "<n>",
    default: 8787,
    help: "TCP port ({default}; 0 picks a free one)",
    commands: ["serve"],
  },
  {
    path: "serve.host",
    kind: "string",
    flag: "host",
    argument: "<addr>",
    default: "127.0.0.1",
    help: "address to listen on",
    commands: ["serve"],
  },
  {
    path: "serve.headersTimeoutMs",
    kind: "integer",
    min: 100,
    flag: "headers-timeout-ms",
    argument: "<n>",
    default: DEFAULT_HTTP_TIMEOUTS.headersTimeoutMs,
    help: "time a client has to send a request's headers, else 408",
    commands: ["serve"],
  },
  {
    path: "serve.requestTimeoutMs",
    kind: "integer",
    min: 100,
    flag: "request-timeout-ms",
    argument: "<n>",
    default: DEFAULT_HTTP_TIMEOUTS.requestTimeoutMs,
    help: "time a client has to send a whole request with its body, else 408",
    commands: ["serve"],
  },
  {
    path: "serve.corsOrigins",
    kind: "list",
    flag: "cors-origin",
    argument: "<origin>",
    env: "MOSS_SERVE_CORS_ORIGINS",
    envExample: "https://a.example,https://b.example",
    help: "a web origin whose pages may call the API from a browser, e.g. https://app.example, or *",
    commands: ["serve"],
    inFile: false,
  },
  {
    path: "serve.tracePayloads",
    kind: "off",
    flag: "no-trace-payloads",
    env: "MOSS_NO_TRACE_PAYLOADS",
    default: true,
    help: "keep only host calls' sizes in runs' traces, never their arguments, results or errors (otherwise kept bounded and redacted); the variable does it when set to any value",
    commands: SERVER,
  },
  {
    path: "worker.concurrency",
    kind: "integer",
    min: 1,
    flag: "concurrency",
    argument: "<n>",
    default: DEFAULT_CONCURRENCY,
    help: "runs this process executes at once",
    commands: SERVER,
  },
  {
    path: "worker.leaseMs",
    kind: "integer",
    min: 100,
    flag: "lease-ms",
    argument: "<n>",
    default: DEFAULT_LEASE_MS,
    help: "how long a worker holds a run between heartbeats before another may take it over",
    commands: SERVER,
  },
  {
    path: "worker.maxRunsPerTenant",
    kind: "integer",
    min: 1,
    flag: "max-runs-per-tenant",
    argument: "<n>",
    otherwise: "no cap",
    help: "runs one tenant may have running at once over all workers ({default}; runs are claimed fairly among tenants with queued work either way)",
    commands: SERVER,
  },
  {
    path: "worker.maxTakeovers",
    kind: "integer",
    min: 0,
    flag: "max-takeovers",
    argument: "<n>",
    default: DEFAULT_MAX_TAKEOVERS,
    help: "times a run may be taken over from a lost worker before it fails without running again",
    commands: SERVER,
  },
  {
    path: "log.level",
    kind: "choice",
    choices: LOG_LEVELS,
    flag: "log-level",
    argument: "<level>",
    env: "MOSS_LOG_LEVEL",
    default: "info",
    help: "the operator's log on stderr, JSON lines: {choices}",
    commands: SERVER,
  },
  {
    path: "tokens",
    kind: "list",
    flag: "token",
    argument: "<tenant:secret>",
    env: "MOSS_SERVE_TOKENS",
    envExample: "a:s1,b:s2",
    help: "a tenant's bearer token",
    commands: ["serve"],
  },
];

/** The setting at `path`; a path not in the table is a bug of the caller. */
export function setting(path: string): Setting {
  const found = SETTINGS.find((entry) => entry.path === path);
  if (found === undefined) throw new Error(`no setting ${path}`);
  return found;
}

/** The settings `command` applies. */
export function settingsOf(command: SettingsCommand): Setting[] {
  return SETTINGS.filter((entry) => entry.commands.includes(command));
}

/** Whether `command` takes the setting's flag. */
export function hasFlag(entry: Setting, command: SettingsCommand): boolean {
  return entry.flag !== undefined && (entry.flagIn ?? entry.commands).includes(command);
}

type FlagOption = { type: "string" | "boolean"; multiple?: boolean };

/** The options every settings command takes besides its settings' flags. */
interface ConfigOptions {
  config: { type: "string" };
  "print-config": { type: "boolean" };
}

/** The node:util parseArgs options of the settings' flags `command` takes, with `--config` and `--print-config`. */
export function settingOptions(command: SettingsCommand): Record<string, FlagOption> & ConfigOptions {
  const options: Record<string, FlagOption> & ConfigOptions = {
    config: { type: "string" },
    "print-config": { type: "boolean" },
  };
  for (const entry of settingsOf(command)) {
    if (!hasFlag(entry, command)) continue;
    options[entry.flag!] =
      entry.kind === "off"
        ? { type: "boolean" }
        : entry.kind === "list"
          ? { type: "string", multiple: true }
          : { type: "string" };
  }
  return options;
}

/** What applies when nothing sets the setting, in words (`10`, `$MOSS_MODEL, then gpt-4o-mini`), or undefined. */
export function defaultText(entry: Setting): string | undefined {
  if (entry.kind === "off" || entry.kind === "list") return undefined;
  const shown = entry.default === undefined ? entry.otherwise : String(entry.default);
  const parts = [entry.env === undefined ? undefined : `$${entry.env}`, shown].filter(
    (part): part is string => part !== undefined,
  );
  return parts.length === 0 ? undefined : parts.join(", then ");
}

/** The setting's help line with its default, choices and (for a list) its environment variable filled in. */
export function helpText(entry: Setting, withDefault = true): string {
  let text = entry.help.replace("{choices}", () => wordList(entry.choices ?? []));
  const fallback = defaultText(entry);
  if (text.includes("{default}")) text = text.replace("{default}", () => `default ${fallback ?? "none"}`);
  else if (fallback !== undefined && withDefault) text = `${text} (default ${fallback})`;
  if (entry.kind === "list") {
    text = `${text} (repeatable${entry.env === undefined ? "" : `; also $${entry.env}=${JSON.stringify(entry.envExample)}`})`;
  }
  return text;
}

/** `--max-steps <n>` */
function flagText(entry: Setting): string {
  return `--${entry.flag}${entry.argument === undefined ? "" : ` ${entry.argument}`}`;
}

/** The usage lines of the settings' flags `command` takes, wrapped to `width` columns. */
export function settingsUsage(command: SettingsCommand, width = 118): string {
  return settingsOf(command)
    .filter((entry) => hasFlag(entry, command))
    .map((entry) => usageLine(flagText(entry), helpText(entry), width))
    .join("\n");
}

/** One option of a usage text: `  --flag <arg>` in a column of 24, then its help, wrapped under itself. */
export function usageLine(option: string, help: string, width = 118): string {
  const head = option.length < 24 ? `  ${option.padEnd(24)}` : `  ${option} `;
  const indent = " ".repeat(26);
  const lines: string[] = [];
  let line = head;
  for (const word of help.split(" ")) {
    if (line.length + word.length > width && line.trim() !== "" && line !== head) {
      lines.push(line.trimEnd());
      line = indent;
    }
    line += line === head || line === indent ? word : ` ${word}`;
  }
  lines.push(line);
  return lines.join("\n");
}

/** `a, b or c` */
function wordList(words: readonly string[]): string {
  return words.length < 2 ? words.join("") : `${words.slice(0, -1).join(", ")} or ${words.at(-1)}`;
}

/** The commands of a setting as the reference shows them. */
function commandsText(entry: Setting): string {
  return entry.commands
    .map((command) => (hasFlag(entry, command) || entry.flag === undefined ? command : `${command} (file)`))
    .join(", ");
}

/** The kind and bounds of a setting as the reference shows them. */
function kindText(entry: Setting): string {
  switch (entry.kind) {
    case "integer":
      return entry.max === undefined ? `integer ≥ ${entry.min}` : `integer ${entry.min}–${entry.max}`;
    case "off":
      return "boolean";
    case "choice":
      return `one of ${(entry.choices ?? []).join(", ")}`;
    case "list":
      return "list of strings";
    default:
      return "string";
  }
}

/** docs/reference/settings.md: the table as a page (`node scripts/settings-doc.js` writes it). */
export function settingsReference(): string {
  const cell = (text: string) => text.replaceAll("|", "\\|");
  const code = (text: string | undefined) => (text === undefined ? "" : `\`${text}\``);
  const rows = SETTINGS.map((entry) =>
    [
      entry.inFile === false ? `(${entry.path}, not in the file)` : code(entry.path),
      entry.flag === undefined ? "" : code(flagText(entry)),
      entry.env === undefined ? "" : code(`$${entry.env}`),
      kindText(entry),
      entry.kind === "off"
        ? String(entry.default)
        : entry.default === undefined
          ? (entry.otherwise ?? "")
          : String(entry.default),
      commandsText(entry),
      helpText(entry, false),
    ].map(cell),
  );
  const header = ["Key in moss.config.yaml", "Flag", "Environment", "Kind", "Default", "Commands", "Help"];
  return `<!-- Generated from engine/cli/settings.ts by \`node scripts/settings-doc.js\`; do not edit by hand. -->

# Settings

Every setting of \`moss serve\`, \`moss worker\` and \`moss agent\`, from one table (\`engine/cli/settings.ts\`): the
commands' flags, the schema of \`moss.config.yaml\`, \`--help\` and this page are all made from it. A setting comes
from its flag, else its environment variable, else \`moss.config.yaml\` (\`--config <file>\`, by default the working
directory's), else its default; \`--print-config\` prints every setting in effect with where it came from. A list
(\`--token\`, \`--cors-origin\`) takes every source together. "(file)" after a command: it reads the setting from
\`moss.config.yaml\` only, without a flag.

${markdownTable(header, rows)}

Besides these, \`moss.config.yaml\` may hold:

- \`limits.tenants.<tenant>.\` followed by ${SETTINGS.filter((entry) => entry.perTenant)
    .map((entry) => code(entry.path.split(".").at(-1)))
    .join(" or ")}: one tenant's own limit, over the \`limits.\` value every tenant gets.
- \`modules.<module.ts>.config\`: the module's \`config\` section (over the defaults of its own
  \`<module>.config.yaml\`, key by key), bound in its container as \`"moss.config"\`; and
  \`modules.<module.ts>.host\`: its host setup file, relative to the config file. Nothing else of a module may be set
  here.

An unknown key, or a value of the wrong kind, is an error (exit 4) located at its line and column; the first one found
is reported, e.g.
\`\`error[config-invalid]: moss.config.yaml:2:3 - unknown key \`model.nmae\` — did you mean \`name\`? (known: name, baseUrl, maxTokens, contextTokens)\`\`.
`;
}

/** A markdown table with its columns aligned (as biome formats it, so the page passes `biome check`). */
function markdownTable(header: string[], rows: string[][]): string {
  const widths = header.map((title, column) =>
    Math.max(3, title.length, ...rows.map((row) => row[column]!.length)),
  );
  const line = (cells: string[]) =>
    `| ${cells.map((text, column) => text.padEnd(widths[column]!)).join(" | ")} |`;
  return [line(header), line(widths.map((width) => "-".repeat(width))), ...rows.map(line)].join("\n");
}
