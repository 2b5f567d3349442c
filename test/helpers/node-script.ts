import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";

/** What a Node script printed and how it ended. */
export interface ScriptResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Writes `source` to `file` and runs it with plain `node` (plus tsx for TypeScript and `--no-node-snapshot` for
 * isolated-vm) in `cwd`; stdin is closed. With `killAfterMs`, a script still running then is killed (SIGKILL).
 */
export function runNodeScript(
  file: string,
  source: string,
  options: { cwd: string; killAfterMs?: number },
): Promise<ScriptResult> {
  writeFileSync(file, source);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--no-node-snapshot", "--import", "tsx", file], {
      cwd: options.cwd,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    const timer =
      options.killAfterMs === undefined
        ? undefined
        : setTimeout(() => child.kill("SIGKILL"), options.killAfterMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
