import type { Nondeterminism } from "../sandbox/index.ts";
import type { Answers, ExecutionLimits } from "../types.ts";
import type { LogEntry } from "./log-entry.ts";
import type { PreparedSnippet } from "./prepare-snippet.ts";

/** One run of model code: a new execute, or a resume replaying a log. */
export interface RunPlan {
  code: string;
  prepared: PreparedSnippet;
  target: string;
  /** Wire-encoded extra arguments. */
  args: string[];
  localArgs: string[];
  limits: ExecutionLimits;
  replay: readonly LogEntry[];
  nondeterminism?: Nondeterminism;
  answers: Answers;
  /** The data fields' encoded properties when the run began (a continuation carries them). */
  dataBefore: Record<string, unknown>;
  /** Stops the run when it aborts (see `ExecuteRequest.signal`). */
  signal?: AbortSignal;
  /** The run's part of its request ids, drawn when it first starts and kept across its pauses and takeovers. */
  requestTag: string;
}

/** The pattern of a target declared without parameters, by target: compiling it cost ~50 µs of every execute. */
const parameterlessDeclarations = new Map<string, RegExp>();

/** `moss` is passed when the target declares a parameter (a bare `main()` gets nothing). */
export function defaultLocalArgs(code: string, target: string): string[] {
  let declaration = parameterlessDeclarations.get(target);
  if (declaration === undefined) {
    declaration = new RegExp(
      `function\\s*\\*?\\s*${target}\\s*\\(\\s*\\)|${target}\\s*=\\s*(?:async\\s*)?\\(\\s*\\)\\s*=>`,
    );
    if (parameterlessDeclarations.size < 64) parameterlessDeclarations.set(target, declaration);
  }
  return declaration.test(code) ? [] : ["moss"];
}
