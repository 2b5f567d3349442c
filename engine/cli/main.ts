import { closest } from "../closest.ts";
import { MossError } from "../errors.ts";
import { closeSharedSandboxes } from "../runtime/shared-sandbox.ts";
import type { CliCommand, CliIo } from "./cli-io.ts";
import { escapeControlCharacters } from "./escape-control-characters.ts";
import { EXIT, EXIT_CODES_HELP, exitCodeOf } from "./exit-codes.ts";

const USAGE = `moss — code as prompt, code as action

Usage:
  moss prompt <module.ts> [--json]                       print the prompt a model reads for a context module
  moss run <module.ts> --code <file|-> [--context <file>] run code against a module, updating the context file
  moss check <module.ts> --code <file|->                  type-check code against a module, like tsc
  moss agent <module.ts> "<task>" [--session <id>]        let a model do a task through the module
  moss run <module.ts> --resume [--answers <file>]        resume the run the module left paused (exit 7)
  moss test <module.ts> [--host]                          run the module's __moss_test_cases__ against its test fakes
  moss serve <module.ts> [--port <n>] [--token <t:s>]     serve agents over HTTP (threads, runs, SSE events)
  moss worker <module.ts> --database-url <url>            execute the runs of moss serve instances, without HTTP
  moss daemon <status|stop>                               the warm path's background process (MOSS_NO_DAEMON=1: off)

Run "moss <command> --help" for a command's options.

${EXIT_CODES_HELP}`;

// Each command is imported only when it runs: `moss --help` loads none of ts-morph, esbuild, isolated-vm, openai.
const COMMANDS: Record<string, () => Promise<CliCommand>> = {
  prompt: async () => (await import("./prompt-command.ts")).promptCommand,
  run: async () => (await import("./run-command.ts")).runCommand,
  check: async () => (await import("./check-command.ts")).checkCommand,
  agent: async () => (await import("./agent-command.ts")).agentCommand,
  test: async () => (await import("./test-command.ts")).testCommand,
  serve: async () => (await import("./serve-command.ts")).serveCommand,
  worker: async () => (await import("./serve-command.ts")).workerCommand,
  daemon: async () => (await import("./daemon-command.ts")).daemonCommand,
};

/** Runs the CLI with `argv` (without node and script); returns the exit code (see {@link EXIT}). */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  const [name, ...rest] = argv;
  if (name === "--help" || name === "-h" || name === "help") {
    io.stdout.write(`${USAGE}\n`);
    return EXIT.ok;
  }
  if (!name) {
    io.stderr.write(`moss: missing command\n\n${USAGE}\n`);
    return EXIT.usage;
  }
  const load = COMMANDS[name];
  if (!load) {
    const suggestion = closest(name, Object.keys(COMMANDS));
    io.stderr.write(
      `moss: unknown command "${name}"${suggestion ? ` — did you mean "${suggestion}"?` : ""}\n\n${USAGE}\n`,
    );
    return EXIT.usage;
  }
  try {
    return await (await load())(rest, io);
  } catch (error) {
    io.stderr.write(`${escapeControlCharacters(formatError(error))}\n`);
    return exitCodeOf(error);
  } finally {
    await closeSharedSandboxes();
  }
}

/** The message a user reads for an error: MossErrors as they are (they carry file:line:col), others with a stack. */
export function formatError(error: unknown): string {
  if (MossError.is(error)) return `error[${error.code}]: ${error.message}`;
  const internal = "internal error in moss-ts (a bug: please report it with this stack)";
  if (error instanceof Error) return `error: ${internal}\n${error.stack ?? error.message}`;
  return `error: ${internal}\n${String(error)}`;
}

function processIo(): CliIo {
  ignoreClosedReader(process.stdout);
  ignoreClosedReader(process.stderr);
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    cwd: process.cwd(),
  };
}

/**
 * A reader that stopped reading (`moss check … | head -1`) is not an error of the command: Node reports EPIPE on the
 * stream, which had no listener and so crashed the process with a stack trace. What is written after that is
 * dropped; the command finishes and exits with its own code (a shell with `pipefail` still sees a failed check).
 */
function ignoreClosedReader(stream: NodeJS.WriteStream): void {
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
  });
}
