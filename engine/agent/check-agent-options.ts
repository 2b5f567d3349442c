import { MossError } from "../errors.ts";
import { DEFAULT_MAX_ERRORS, DEFAULT_MAX_STEPS } from "../stop-reasons.ts";
import type { MossAgentOptions } from "./agent-types.ts";
import { promptBudget } from "./context-window.ts";

/** {@link MossAgentOptions} with its defaults filled in. */
export type CheckedAgentOptions = MossAgentOptions &
  Required<Pick<MossAgentOptions, "maxSteps" | "maxConsecutiveErrors" | "maxContinuations" | "tools">>;

/** Checks a MossAgent's options and fills in the defaults; a MossError (`invalid-argument`) names the bad option. */
export function checkAgentOptions(options: MossAgentOptions): CheckedAgentOptions {
  const maxSteps = options.maxSteps ?? DEFAULT_MAX_STEPS;
  const maxErrors = options.maxConsecutiveErrors ?? DEFAULT_MAX_ERRORS;
  if (!Number.isInteger(maxSteps) || maxSteps < 1) {
    throw new MossError("invalid-argument", `maxSteps must be a positive integer, got ${maxSteps}.`);
  }
  if (!Number.isInteger(maxErrors) || maxErrors < 1) {
    throw new MossError(
      "invalid-argument",
      `maxConsecutiveErrors must be a positive integer, got ${maxErrors}.`,
    );
  }
  for (const [name, value] of [
    ["maxTokens", options.maxTokens],
    ["contextTokens", options.contextTokens],
  ] as const) {
    if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
      throw new MossError("invalid-argument", `${name} must be a positive integer, got ${value}.`);
    }
  }
  const maxContinuations = options.maxContinuations ?? 2;
  if (!Number.isInteger(maxContinuations) || maxContinuations < 0) {
    throw new MossError(
      "invalid-argument",
      `maxContinuations must be a non-negative integer, got ${maxContinuations}.`,
    );
  }
  if (
    options.maxTokens !== undefined &&
    options.contextTokens !== undefined &&
    promptBudget(options.contextTokens, options.maxTokens) < 1
  ) {
    throw new MossError(
      "invalid-argument",
      `maxTokens (${options.maxTokens}) leaves no room for the prompt in a context of ${options.contextTokens} tokens.`,
    );
  }
  if (options.createRuntime === undefined && options.modulePath === undefined) {
    throw new MossError("invalid-argument", "MossAgent needs a modulePath (or a createRuntime function).");
  }
  return {
    ...options,
    maxSteps,
    maxConsecutiveErrors: maxErrors,
    maxContinuations,
    tools: options.tools ?? true,
  };
}
