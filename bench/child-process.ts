import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The marker a benchmark child prints before its JSON result line. */
export const RESULT_MARKER = "@@bench-result ";

const RUNNER = fileURLToPath(new URL("./run.js", import.meta.url));

/** Runs `bench/run.js --child <task> ...args` in a fresh Node process and returns the JSON it reports. */
export function runChild<T>(
  task: string,
  args: string[],
  nodeFlags: string[] = [],
  timeoutMs = 240_000,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--no-node-snapshot", ...nodeFlags, RUNNER, "--child", task, ...args],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      const line = stdout.split("\n").find((candidate) => candidate.startsWith(RESULT_MARKER));
      if (code === 0 && line) {
        resolve(JSON.parse(line.slice(RESULT_MARKER.length)) as T);
        return;
      }
      reject(
        new Error(
          `benchmark child "${task}" ${signal ? `was killed by ${signal}` : `exited with ${code}`}\n${stderr.slice(-2000)}`,
        ),
      );
    });
  });
}

/** Prints a child's result where `runChild` finds it. */
export function reportToParent(result: unknown): void {
  process.stdout.write(`${RESULT_MARKER}${JSON.stringify(result)}\n`);
}
