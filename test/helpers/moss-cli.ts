import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const BIN = fileURLToPath(new URL("../../bin/moss.js", import.meta.url));

/** What a run of the `moss` binary printed and how it exited. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real `moss` binary in a child process, as a user would: stdin is a pipe (never a TTY) that gets
 * `input` (or nothing) and ends; `env` is added to this process's environment (colours off, not under vitest);
 * `cwd` is the working directory (default this process's).
 */
export async function runMoss(
  args: string[],
  options: { input?: string; env?: Record<string, string>; cwd?: string } = {},
): Promise<CliResult> {
  const child = promisify(execFile)(process.execPath, ["--no-node-snapshot", BIN, ...args], {
    env: { ...process.env, VITEST: "", NO_COLOR: "1", ...options.env },
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    maxBuffer: 16 * 1024 * 1024,
  });
  child.child.stdin?.end(options.input);
  try {
    const { stdout, stderr } = await child;
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as CliResult;
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** The `--print-config` line of the setting at `path`, its spacing collapsed: `model.name "x" # moss.config.yaml:2:9`. */
export function printedSetting(stdout: string, path: string): string | undefined {
  return stdout
    .split("\n")
    .find((entry) => entry.startsWith(`${path} `))
    ?.replace(/\s+/g, " ");
}
