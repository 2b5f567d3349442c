import { MossError } from "../errors.ts";
import { DEFAULT_MAX_TOKENS } from "../stop-reasons.ts";
import { promptBudget } from "./context-window.ts";

/** The output limit and the prompt budget of one run. */
export interface RunWindow {
  contextTokens: number;
  maxTokens: number;
  budgetTokens: number;
  /** Our token count ÷ the server's, learnt from a context overflow (1 until then). */
  scale: number;
}

/**
 * Sizes a run's window for a context of `contextTokens`: the output limit (`maxTokens` when given, else a default
 * that never takes more than a quarter of a small context) and what is left for the prompt, scaled by what the
 * server taught (`scale`). A MossError when nothing is left for the prompt.
 */
export function sizeRunWindow(contextTokens: number, maxTokens: number | undefined, scale = 1): RunWindow {
  const output = maxTokens ?? Math.min(DEFAULT_MAX_TOKENS, Math.floor(contextTokens / 4));
  const budgetTokens = Math.floor(promptBudget(contextTokens, output) * scale);
  if (budgetTokens < 1) {
    throw new MossError(
      "invalid-argument",
      `maxTokens (${output}) leaves no room for the prompt in a context of ${contextTokens} tokens.`,
    );
  }
  return { contextTokens, maxTokens: output, budgetTokens, scale };
}
