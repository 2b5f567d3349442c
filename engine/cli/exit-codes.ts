import { MossError } from "../errors.ts";

/** The exit codes of every `moss` command: the same meaning whatever the command. */
export const EXIT = {
  /** The command did what was asked: code type-checks, ran, every test passed, the model answered. */
  ok: 0,
  /** The work failed: type errors, a runtime error of the code, a failed test case, a failed agent run. */
  failed: 1,
  /** The command line is wrong: unknown command or option, missing or bad argument. Nothing ran. */
  usage: 2,
  /** `moss agent` only: stopped by --max-steps or --max-errors before the model answered. */
  stopped: 3,
  /** An input could not be used: the module (not found, syntax, load, binding), its host setup, the --code file, a context file (unreadable, corrupt, unwritable), the model server. */
  input: 4,
  /** `moss agent` only: the model's answers kept being cut off at the output limit (`--max-tokens`). */
  truncated: 5,
  /** `moss agent` only: the model gave neither code nor a clear final answer, also after it was told so. */
  unclear: 6,
  /** `moss agent`/`moss run`: the code waits for a person (a call to approve, a question) and no one could answer (an agent's session, or `moss run` beside its context file, keeps the paused run for `--resume`). */
  paused: 7,
  /** An unexpected error inside moss-ts: a bug, reported with its stack. */
  internal: 70,
} as const;

/** The exit-code table shown by `moss --help` and in the README. */
export const EXIT_CODES_HELP = `Exit codes (the same for every command):
  0   success: the code type-checks / ran, every test case passed, the model answered
  1   failure: type errors, a runtime error in the code, a failed test case, a failed agent run
  2   usage error: unknown command or option, missing or bad argument (nothing ran)
  3   moss agent stopped by --max-steps or --max-errors
  4   an input could not be used: the module or its host setup, the --code file, a context file, the model server
  5   moss agent stopped: the model's answers kept being cut off at the output limit (--max-tokens)
  6   moss agent stopped: the model gave neither code nor a clear final answer
  7   paused: the code waits for answers no one gave; resume it with --resume (moss run keeps the run, moss agent needs --session <id>)
  70  internal error in moss-ts (a bug: please report it with the stack shown)`;

/** A MossError for a wrong command line: exits with {@link EXIT.usage} and shows the command's usage. */
export function usageError(message: string, usage: string, details: Record<string, unknown> = {}): MossError {
  return new MossError("invalid-argument", `${message}\n\n${usage}`, { ...details, usage: true });
}

/** The exit code for an error that ended a command. */
export function exitCodeOf(error: unknown): number {
  if (!MossError.is(error)) return EXIT.internal;
  return error.details.usage === true ? EXIT.usage : EXIT.input;
}

/** Codes of errors in the module, its host setup or a context file: the input could not be used. */
const INPUT_ERROR_CODES: ReadonlySet<string> = new Set([
  "module-not-found",
  "module-syntax",
  "module-import",
  "module-load",
  "hook-shape",
  "hook-failed",
  "binding-missing",
  "context-corrupt",
  "context-invalid",
  "context-read",
  "context-write",
  "context-mismatch",
  "context-wrong-module",
  "context-locked",
  "module-type-error",
  "moss-member-reserved",
  "credential-missing",
  "schema-too-large",
  "config-invalid",
]);

/** Whether `error` says the module, its host setup or a context file could not be used (exit {@link EXIT.input}). */
export function isInputError(error: unknown): boolean {
  return MossError.is(error) && INPUT_ERROR_CODES.has(error.code);
}
