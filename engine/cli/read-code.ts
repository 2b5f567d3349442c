import { readFile } from "node:fs/promises";
import type { Readable } from "node:stream";
import { MossError } from "../errors.ts";
import { usageError } from "./exit-codes.ts";

/** Reads the model's code from a file, or from stdin when the path is `-`. */
export async function readCode(source: string | undefined, stdin: Readable, usage: string): Promise<string> {
  if (!source) throw usageError("missing --code <file|->", usage);
  if (source === "-") {
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
    return Buffer.concat(chunks).toString("utf8");
  }
  try {
    return await readFile(source, "utf8");
  } catch (error) {
    throw new MossError(
      "invalid-argument",
      `--code ${source}: cannot read (${(error as NodeJS.ErrnoException).code ?? error})`,
      {
        file: source,
      },
    );
  }
}

/** Reads an option whose value must be one of `allowed`. */
export function oneOf<T extends string>(
  usage: string,
  name: string,
  value: string | undefined,
  allowed: readonly T[],
  fallback: T,
): T {
  if (value === undefined) return fallback;
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw usageError(`--${name} must be one of ${allowed.join(", ")}; got "${value}"`, usage);
}
