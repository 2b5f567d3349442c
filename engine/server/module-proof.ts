// A server's start-up proof that its context module and host setup load, in a process of its own: the proof reads
// the module with TypeScript (the analysis, ~150 MiB with the compiler's code and the lib), and a server that
// proved it on its own thread held all of that while idle, before any run needed it. The process ends with the
// proof; the server's thread loads the engine with the first run (or prompt) that needs it.
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MossError, type MossErrorCode } from "../errors.ts";

/** What the proof's process is given (plain data: it crosses a process boundary). */
export interface ModuleProofInput {
  modulePath: string;
  hostSetup?: boolean | string;
  moduleConfig: Record<string, unknown>;
  compiler: Record<string, unknown>;
}

/** What it answers. */
export type ModuleProofReport =
  | { ok: true }
  | {
      ok: false;
      error: {
        name: string;
        message: string;
        code?: string;
        details?: Record<string, unknown>;
        stack?: string;
      };
    };

/** Whether `value` is plain data all the way down (JSON's kinds): what can be handed to another process as it is. */
export function isPlainData(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  if (typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (Array.isArray(value)) return value.every(isPlainData);
  if (typeof value !== "object") return false;
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return false;
  return Object.values(value).every(isPlainData);
}

/**
 * Reads, loads and sets up the module in a process of its own, as a thread's first run would with its type check
 * off; resolves once it did, or rejects with the error that process met (a `MossError` keeps its code, details and
 * located message). The process inherits this one's environment, working directory, stdout and stderr.
 */
export async function proveModuleInProcess(input: ModuleProofInput): Promise<void> {
  const extension = import.meta.url.endsWith(".ts") ? ".ts" : ".js";
  const entry = fileURLToPath(new URL(`./module-proof-process${extension}`, import.meta.url));
  // From the sources (a checkout), the entry starts as bin/moss.js starts the CLI from them (scripts/ is the
  // checkout's, never published: the built code takes the other branch).
  const here = path.dirname(fileURLToPath(import.meta.url));
  const launch =
    extension === ".ts" ? [path.resolve(here, "..", "..", "scripts", "source-launch.js"), entry] : [entry];
  const child = spawn(process.execPath, ["--no-node-snapshot", ...launch], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const report = await new Promise<ModuleProofReport | undefined>((resolve, reject) => {
    let answer: ModuleProofReport | undefined;
    child.once("message", (message: ModuleProofReport) => {
      answer = message;
    });
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      if (answer === undefined && (code !== 0 || signal !== null))
        reject(
          new MossError(
            "module-load",
            `The start-up proof of the context module ${input.modulePath} ended before it answered (${signal ?? `exit code ${code}`}).`,
            { modulePath: input.modulePath },
          ),
        );
      else resolve(answer);
    });
    child.send(input);
  });
  if (report === undefined || report.ok) return;
  const { name, message, code, details, stack } = report.error;
  if (code === undefined) {
    const error = new Error(message);
    error.name = name;
    if (stack !== undefined) error.stack = stack;
    throw error;
  }
  const error = new MossError(code as MossErrorCode, message, details ?? {});
  if (stack !== undefined) error.stack = stack;
  throw error;
}
