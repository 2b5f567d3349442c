import type { Readable, Writable } from "node:stream";

/** The streams and environment a CLI command runs with; tests pass their own. */
export interface CliIo {
  stdout: Writable & { isTTY?: boolean };
  stderr: Writable & { isTTY?: boolean };
  stdin: Readable;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

/** A subcommand: parses its own arguments, writes to `io`, returns the process exit code. */
export type CliCommand = (argv: string[], io: CliIo) => Promise<number>;
