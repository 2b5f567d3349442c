import { execFile } from "node:child_process";
import { promisify } from "node:util";

/** What a run of the `moss` binary printed and how it exited. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real `moss` binary in a child process, as a user would: stdin is a pipe (never a TTY) that gets
 * `input` (or nothing) and ends; `env` is added to this process's environment (colours off, not under vitest).
 */
export async function runMoss(
  args: string[],
  options: { input?: string; env?: Record<string, string> } = {},
): Promise<CliResult> {
  const child = promisify(execFile)(process.execPath, ["--no-node-snapshot", "bin/moss.js", ...args], {
    env: { ...process.env, VITEST: "", NO_COLOR: "1", ...options.env },
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
