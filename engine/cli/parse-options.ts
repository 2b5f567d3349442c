import { parseArgs } from "node:util";
import { MossError } from "../errors.ts";

type OptionSpec = Record<string, { type: "string" | "boolean"; short?: string; multiple?: boolean }>;

/** Parses a command's arguments strictly; an unknown option is a clear error naming it and the command's usage. */
export function parseOptions<T extends OptionSpec>(argv: string[], options: T, usage: string) {
  try {
    return parseArgs({
      args: argv,
      options: { ...options, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new MossError("invalid-argument", `${(error as Error).message}\n\n${usage}`, {});
  }
}

/** The `<module.ts>` positional every command takes; a clear error with the usage when it is missing. */
export function requireModulePath(positionals: string[], usage: string): string {
  const [modulePath] = positionals;
  if (!modulePath) throw new MossError("invalid-argument", `missing <module.ts>\n\n${usage}`, {});
  return modulePath;
}
