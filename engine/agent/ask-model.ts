import { MossError } from "../errors.ts";
import type { LanguageModel, LanguageModelResponse, PartialResponse } from "../model/index.ts";
import { MOSS_TOOL } from "./agent-prompt.ts";
import type { AgentEvent } from "./agent-types.ts";
import { describeTrim, type WindowEntry } from "./context-window.ts";
import { type FittedContext, fitContextOffThread } from "./fit-context-thread.ts";
import { type RunWindow, sizeRunWindow } from "./run-window.ts";

/** What one model call of a step needs. */
export interface AskModelOptions {
  model: LanguageModel;
  system: string;
  /** The run's window; a context overflow reported by the server resizes it for the rest of the run. */
  window: RunWindow;
  /** The conversation's thread as chat messages (see chatMessages). */
  entries: WindowEntry[];
  /** Offer the `moss` tool. */
  tools: boolean;
  /** The `maxTokens` option as given (undefined: the window's default). */
  maxTokens: number | undefined;
  temperature?: number | undefined;
  /** Stream text deltas (as `text-delta` events). */
  stream: boolean;
  signal?: AbortSignal | undefined;
  step: number;
  emit: (event: AgentEvent) => void;
  /** Called with what a cut or broken stream sent before it failed, before the error is thrown. */
  onPartial: (partial: PartialResponse, reason: string) => Promise<void>;
}

/**
 * Asks the model for one answer: the thread is fitted to the window (a `context-trimmed` event says what was
 * shortened), then sent. When the server says the prompt does not fit its context, its count is adopted for the
 * rest of the run and the call is made once more, shortened harder.
 */
export async function askModel(options: AskModelOptions): Promise<LanguageModelResponse> {
  const { window, step, emit, signal } = options;
  let budget = window.budgetTokens;
  let overflow: unknown;
  for (let attempt = 0; ; attempt++) {
    let fitted: FittedContext;
    try {
      // Counted on a thread of its own: a long message must not hold the thread that serves HTTP and other runs.
      fitted = await fitContextOffThread(
        { role: "system", content: options.system },
        options.entries,
        budget,
      );
    } catch (error) {
      // Shortening after the server's overflow cannot help: its own words are the clearer error.
      throw overflow ?? error;
    }
    const { messages, trim } = fitted;
    if (trim !== undefined) {
      emit({
        type: "context-trimmed",
        step,
        trim,
        contextTokens: window.contextTokens,
        message: describeTrim(trim, window.contextTokens),
      });
    }
    const request = {
      messages,
      ...(options.tools ? { tools: [MOSS_TOOL] } : {}),
      maxTokens: window.maxTokens,
      ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
      ...(signal === undefined ? {} : { signal }),
    };
    try {
      if (!options.stream) return await options.model.generate(request);
      return await options.model.stream(request, (delta) => emit({ type: "text-delta", step, delta }));
    } catch (error) {
      if (MossError.is(error) && error.details.partial !== undefined) {
        await options.onPartial(error.details.partial as PartialResponse, String(error.details.reason));
      }
      if (attempt > 0 || !MossError.is(error) || error.details.reason !== "context-overflow") throw error;
      // The server counts more tokens than we do, or its context is smaller than we were told: adopt what it
      // says for the rest of the run, shorten harder than what failed, and ask once more.
      overflow = error;
      const sent = fitted.tokens;
      const theirs = error.details.promptTokens;
      const theirContext = error.details.contextTokens;
      Object.assign(
        window,
        sizeRunWindow(
          typeof theirContext === "number" && theirContext < window.contextTokens
            ? theirContext
            : window.contextTokens,
          options.maxTokens,
          window.scale * (typeof theirs === "number" && theirs > sent ? sent / theirs : 0.7),
        ),
      );
      budget = Math.max(1, Math.min(window.budgetTokens, Math.floor(sent * 0.8)));
      emit({
        type: "notice",
        step,
        kind: "context-overflow",
        message: `The model server said the prompt (${sent} tokens by our count${typeof theirs === "number" ? `, ${theirs} by its own` : ""}) does not fit its context${typeof theirContext === "number" ? ` of ${theirContext} tokens` : ""}; shortening to ${budget} tokens and asking again.`,
      });
    }
  }
}
