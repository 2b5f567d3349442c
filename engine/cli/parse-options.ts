import { parseArgs } from "node:util";
import { closest } from "../closest.ts";
import { usageError } from "./exit-codes.ts";

type OptionSpec = Record<string, { type: "string" | "boolean"; short?: string; multiple?: boolean }>;

type OptionValue<Spec extends OptionSpec[string]> = Spec["type"] extends "boolean"
  ? Spec["multiple"] extends true
    ? boolean[]
    : boolean
  : Spec["multiple"] extends true
    ? string[]
    : string;

/** A command's parsed arguments, typed from its option spec. */
export interface ParsedOptions<T extends OptionSpec> {
  values: { [K in keyof T]?: OptionValue<T[K]> } & { help?: boolean };
  positionals: string[];
}

/** Parses a command's arguments strictly; an unknown option is a clear error naming it and the command's usage. */
export function parseOptions<T extends OptionSpec>(
  argv: string[],
  options: T,
  usage: string,
): ParsedOptions<T> {
  try {
    const parsed = parseArgs({
      args: argv,
      options: { ...options, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
      strict: true,
    });
    return parsed as unknown as ParsedOptions<T>;
  } catch (error) {
    const unknown = (error as Error).message.match(/Unknown option '(-{1,2}[^']+)'/)?.[1];
    if (unknown) {
      const suggestion = closest(unknown.replace(/^-+/, ""), Object.keys(options));
      const hint = suggestion ? ` — did you mean --${suggestion}?` : "";
      throw usageError(`unknown option ${unknown}${hint}`, usage, { option: unknown });
    }
    throw usageError((error as Error).message, usage);
  }
}

/** The `<module.ts>` positional every command takes; a clear error with the usage when it is missing. */
export function requireModulePath(positionals: string[], usage: string): string {
  const [modulePath] = positionals;
  if (!modulePath) throw usageError("missing <module.ts>", usage);
  return modulePath;
}
