import { createHash } from "node:crypto";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { MossError } from "../errors.ts";
import { readJsonFile } from "../read-json-file.ts";
import type { MossContext, PendingRequest } from "../types.ts";

/** A run `moss run` left paused: what it waits for and the continuation that resumes it (never runs it again). */
export interface PausedRun {
  version: 1;
  /** The module's absolute path. */
  module: string;
  /** The code that ran and the function it called: the same command run again resumes this run. */
  code: string;
  /** The name the code's frames show (its file relative to the working directory, or `<stdin>`), kept so a resumed
   * run's errors name the same file as the run that paused. */
  codeFile?: string;
  target: string;
  requests: PendingRequest[];
  /** Signed with `key`, or with `$MOSS_CONTINUATION_KEY` when the run had it. */
  continuation: string;
  /** The run's own signing key when no `$MOSS_CONTINUATION_KEY` was set (the file is readable by its owner only). */
  key?: string;
  /** ISO time of the pause. */
  pausedAt: string;
  /**
   * The session the run paused in, when it has no `--context` file to come back from: a continuation resumes only
   * in its own session (the same `MossContext.id`).
   */
  context?: MossContext;
}

/**
 * Where `moss run` keeps a paused run: beside the context file (`<context>.pending.json`) when the run has one, else
 * `.moss/runs/<module name>-<hash of its path>.pending.json` under the working directory.
 */
export function pausedRunPath(modulePath: string, contextFile: string | undefined, cwd: string): string {
  if (contextFile !== undefined) return `${path.resolve(cwd, contextFile)}.pending.json`;
  const absolute = path.resolve(cwd, modulePath);
  const name = path.basename(absolute).replace(/\.[cm]?tsx?$/, "");
  const hash = createHash("sha256").update(absolute).digest("hex").slice(0, 12);
  return path.join(cwd, ".moss", "runs", `${name}-${hash}.pending.json`);
}

/** The paused run kept in `file`, or undefined when there is none; a file that is not one is a located error. */
export async function readPausedRun(file: string): Promise<PausedRun | undefined> {
  const run = (await readJsonFile(file, ({ kind, error }) => {
    if (kind === "invalid") return corrupt(file, `not valid JSON (${error.message})`);
    // No file, or a path through a file (a --context whose folder is a file: its own error comes after the run).
    if (error.code === "ENOENT" || error.code === "ENOTDIR") return undefined;
    return new MossError("context-read", `${file}: cannot read the paused run (${error.code ?? error})`, {
      file,
    });
  })) as PausedRun | undefined;
  if (run === undefined) return undefined;
  if (
    run?.version !== 1 ||
    typeof run.code !== "string" ||
    typeof run.target !== "string" ||
    typeof run.continuation !== "string" ||
    (run.key !== undefined && typeof run.key !== "string") ||
    (run.context !== undefined && (typeof run.context !== "object" || run.context === null)) ||
    !Array.isArray(run.requests)
  ) {
    throw corrupt(file, "not a paused run written by moss run");
  }
  return run;
}

/** Keeps a paused run in `file` (written whole, then renamed into place: a crash never leaves half a file). */
export async function writePausedRun(file: string, run: PausedRun): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(temporary, `${JSON.stringify(run, null, 2)}\n`, { mode: 0o600 });
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true }).catch(() => {});
    throw new MossError(
      "context-write",
      `${file}: cannot keep the paused run (${(error as NodeJS.ErrnoException).code ?? error}); it cannot be resumed later`,
      { file },
    );
  }
}

/** Forgets a paused run once it resumed to its end (or failed): its continuation cannot be used again. */
export async function removePausedRun(file: string): Promise<void> {
  await rm(file, { force: true });
}

function corrupt(file: string, why: string): MossError {
  return new MossError(
    "context-corrupt",
    `${file}: the paused run cannot be used: ${why}. Delete the file to start the run over.`,
    { file },
  );
}
