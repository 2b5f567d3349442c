import { usageError } from "./exit-codes.ts";
import type { ConfigValue, MossConfig } from "./moss-config.ts";
import { renderConfig } from "./moss-config.ts";
import { hasFlag, type Setting, type SettingsCommand, setting } from "./settings.ts";

/**
 * The settings of one command (`moss serve`, `moss worker`, `moss agent`), read by the table in settings.ts: each from
 * its flag, else its environment variable, else `moss.config.yaml`, else its default, remembering where it came from
 * for `--print-config`.
 */
export class ConfigSettings {
  readonly #config: MossConfig;
  readonly #flags: Record<string, unknown>;
  readonly #env: NodeJS.ProcessEnv;
  readonly #usage: string;
  readonly #command: SettingsCommand;
  readonly #shown: Array<[path: string, entry: ConfigValue | undefined, otherwise?: string]> = [];

  constructor(
    config: MossConfig,
    flags: Record<string, unknown>,
    env: NodeJS.ProcessEnv,
    usage: string,
    command: SettingsCommand,
  ) {
    this.#config = config;
    this.#flags = flags;
    this.#env = env;
    this.#usage = usage;
    this.#command = command;
  }

  /** The setting at `path` (`model.name`): its flag, else its variable, else the file, else its default. */
  get<T>(path: string): T | undefined {
    const entry = setting(path);
    const flag = hasFlag(entry, this.#command) ? entry.flag : undefined;
    const given = flag === undefined ? undefined : (this.#flags[flag] as string | boolean | undefined);
    const fromEnv = entry.env === undefined ? undefined : nonEmpty(this.#env[entry.env]);
    const found: ConfigValue | undefined =
      given !== undefined
        ? { value: this.#parse(entry, String(given), `--${flag}`), source: `--${flag}` }
        : fromEnv !== undefined
          ? { value: this.#parse(entry, fromEnv, `$${entry.env}`), source: `$${entry.env}` }
          : // The file's value is type-checked by the config's schema already.
            (this.#config.entry(path) ??
            (entry.default === undefined ? undefined : { value: entry.default, source: "default" }));
    this.#shown.push([path, found, entry.otherwise]);
    return found?.value as T | undefined;
  }

  /**
   * The values of a list setting (`tokens`) with the source of each: every `--<flag>`, then the comma-separated
   * variable's, then the file's; they add up rather than override. Not shown: the caller shows each as it may.
   */
  list(path: string): Array<[value: string, source: string]> {
    const entry = setting(path);
    const flag = hasFlag(entry, this.#command) ? entry.flag : undefined;
    const given = flag === undefined ? [] : ((this.#flags[flag] as string[] | undefined) ?? []);
    const fromEnv = entry.env === undefined ? [] : splitList(this.#env[entry.env]);
    const file = entry.inFile === false ? undefined : this.#config.entry(path);
    return [
      ...given.map((value): [string, string] => [value, `--${flag}`]),
      ...fromEnv.map((value): [string, string] => [value, `$${entry.env}`]),
      ...((file?.value as string[] | undefined) ?? []).map((value): [string, string] => [
        value,
        file!.source,
      ]),
    ];
  }

  /** A flag's or variable's text as the setting's kind: an integer in its bounds, one of its choices, or as is. */
  #parse(entry: Setting, text: string, source: string): unknown {
    switch (entry.kind) {
      case "off":
        return false;
      case "integer":
        return this.#command === "agent"
          ? positiveInteger(text, source, this.#usage)
          : integerIn(text, source, entry.min ?? 0, entry.max, this.#usage);
      case "choice":
        if (!(entry.choices ?? []).includes(text)) {
          throw usageError(
            `${source} must be one of ${(entry.choices ?? []).join(", ")}, got "${text}"`,
            this.#usage,
          );
        }
        return text;
      default:
        return text;
    }
  }

  /** Shows a value resolved elsewhere (tokens, tenant limits) in `--print-config`. */
  show(path: string, entry: ConfigValue | undefined): void {
    this.#shown.push([path, entry]);
  }

  /** Shows the module's host setup file and its merged `config` section, each leaf with its source. */
  showModule(modulePath: string): void {
    const host = this.#config.hostSetup();
    if (host !== undefined) this.#shown.push([`modules.${modulePath}.host`, host]);
    for (const [path, entry] of this.#config.moduleEntries())
      this.#shown.push([`modules.${modulePath}.config.${path}`, entry]);
  }

  /** What `--print-config` prints: every setting in effect with where it came from. */
  render(): string {
    return renderConfig(this.#shown);
  }
}

/** The value, unless it is missing or only whitespace. */
function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value;
}

/** A comma-separated list's entries, trimmed, without empty ones. */
function splitList(list: string | undefined): string[] {
  return (list ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
}

/** An integer from `min` to `max` (the server commands' rule); anything else is a usage error naming its source. */
function integerIn(
  text: string,
  source: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
  usage: string,
): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
    throw usageError(`${source} needs an integer from ${min} to ${max}, got "${text}"`, usage);
  }
  return value;
}

/**
 * `moss agent`'s integers (all at least 1) keep their own wording: `--max-steps needs a positive integer, got "0"`;
 * the server commands name the range.
 */
function positiveInteger(text: string, source: string, usage: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw usageError(`${source} needs a positive integer, got "${text}"`, usage);
  }
  return value;
}
