import { usageError } from "./exit-codes.ts";
import type { ConfigValue, MossConfig } from "./moss-config.ts";
import { renderConfig } from "./moss-config.ts";

/**
 * The settings of one command (`moss serve`, `moss worker`, `moss agent`): each from its flag, else its environment
 * variable, else `moss.config.yaml`, else its default, remembering where it came from for `--print-config`.
 */
export class ConfigSettings {
  readonly #config: MossConfig;
  readonly #flags: Record<string, unknown>;
  readonly #env: NodeJS.ProcessEnv;
  readonly #usage: string;
  readonly #shown: Array<[string, ConfigValue | undefined]> = [];

  constructor(config: MossConfig, flags: Record<string, unknown>, env: NodeJS.ProcessEnv, usage: string) {
    this.#config = config;
    this.#flags = flags;
    this.#env = env;
    this.#usage = usage;
  }

  /** The setting at `path` (`model.name`): flag `--<flag>`, else `$<envName>`, else the file, else `fallback`. */
  get<T>(
    path: string,
    flag: string | undefined,
    envName: string | undefined,
    parse: (text: string, source: string) => T,
    fallback?: T,
  ): T | undefined {
    const given = flag === undefined ? undefined : (this.#flags[flag] as string | boolean | undefined);
    const fromEnv = envName === undefined ? undefined : nonEmpty(this.#env[envName]);
    const entry: ConfigValue | undefined =
      given !== undefined
        ? { value: parse(String(given), `--${flag}`), source: `--${flag}` }
        : fromEnv !== undefined
          ? { value: parse(fromEnv, `$${envName}`), source: `$${envName}` }
          : // The file's value is type-checked by the config's schema already.
            (this.#config.entry(path) ??
            (fallback === undefined ? undefined : { value: fallback, source: "default" }));
    this.#shown.push([path, entry]);
    return entry?.value as T | undefined;
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

  /** A parser of integers from `min` to `max`; anything else is a usage error naming where the text came from. */
  integer(min: number, max = Number.MAX_SAFE_INTEGER): (text: string, source: string) => number {
    return (text, source) => {
      const value = Number(text);
      if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
        throw usageError(`${source} needs an integer from ${min} to ${max}, got "${text}"`, this.#usage);
      }
      return value;
    };
  }
}

/** The value, unless it is missing or only whitespace. */
export function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value;
}
