import type { Container } from "../../container/index.ts";
import { MossError } from "../errors.ts";
import type {
  Answers,
  ExecuteRequest,
  Execution,
  ExecutionLimits,
  MossContext,
  PendingRequest,
  PendingRun,
} from "../types.ts";
import { buildSystemPrompt, cutOffNotice, MOSS_TOOL, unclearAnswerNotice } from "./agent-prompt.ts";
import {
  type ContextTrim,
  DEFAULT_CONTEXT_TOKENS,
  fitContext,
  promptBudget,
  requestTokens,
  type WindowEntry,
} from "./context-window.ts";
import { Conversation, type ConversationMessage } from "./conversation.ts";
import type { ConversationStore } from "./conversation-store.ts";
import type { CodeSource } from "./extract-code.ts";
import {
  type ExtractedCode,
  extractProseCode,
  extractTextToolCalls,
  extractToolCode,
  stripReasoning,
} from "./extract-code.ts";
import type { LanguageModel, LanguageModelResponse, PartialResponse, ToolCall } from "./language-model.ts";
import { compileModuleRuntime, type ModuleRuntimeOptions } from "./module-runtime.ts";
import { type ObservationLimits, renderObservation } from "./observation.ts";

/** What the agent needs of a MossRuntime (MossRuntime satisfies it). */
export interface AgentRuntime {
  execute(request: ExecuteRequest): Promise<Execution>;
  /** Continues a paused run with a person's answers (a runtime without it cannot resume a paused run). */
  resume?(
    continuation: string,
    answers: Answers,
    options?: { limits?: Partial<ExecutionLimits> },
  ): Promise<Execution>;
  prompter(): { dumpModulePrompt(): Promise<string> };
  dumpContext(): MossContext;
  close(): Promise<void>;
}

/** What the agent needs of a ContextStore (FileContextStore satisfies it). */
export interface AgentContextStore {
  load(sessionId: string): Promise<MossContext | undefined>;
  save(sessionId: string, context: MossContext): Promise<unknown>;
  /** Locks the session for a run, before any code runs (a store that cannot write the session throws here). */
  acquire?(sessionId: string): Promise<void>;
  /** Unlocks the session after the run's last save. */
  release?(sessionId: string): Promise<void>;
}

/** Builds a runtime, continuing from `context` when one is given (a saved session or a retry point). */
export type CreateRuntime = (context: MossContext | undefined) => Promise<AgentRuntime>;

/** Options of {@link MossAgent}. */
export interface MossAgentOptions {
  model: LanguageModel;
  /** The context module the agent works through; compiled with a fresh MossCompiler per runtime. */
  modulePath?: string;
  /** Each compile works in a child of this container (the host's services). */
  container?: Container;
  /** Passed to every MossCompiler (type-check mode, limits, sandbox). */
  compiler?: ModuleRuntimeOptions["compiler"];
  /** Run the module's `<name>.host.ts` `setup(compiler)` before each compile when it exists. Default true. */
  hostSetup?: boolean;
  /** Builds runtimes instead of compiling `modulePath` (any object with the AgentRuntime shape). */
  createRuntime?: CreateRuntime;
  /** Persist the MossContext and the conversation under this id after every step; resume from them. */
  sessionId?: string;
  /** Where the MossContext of the session is saved (required with `sessionId` to persist the context). */
  store?: AgentContextStore;
  /** Where the conversation tree of the session is saved (required with `sessionId` to persist it). */
  conversationStore?: ConversationStore;
  /** Offer the `moss` tool (default). When false the model writes one fenced typescript block per answer. */
  tools?: boolean;
  /** Stream model text as `text-delta` events (default true). */
  stream?: boolean;
  /** Model calls per run before it stops with `max-steps`. Default 10. */
  maxSteps?: number;
  /** Failed steps in a row before the run stops with `max-consecutive-errors`. Default 3. */
  maxConsecutiveErrors?: number;
  /**
   * Output tokens per model call, always sent as `max_tokens` (some servers default to unlimited output).
   * Default {@link DEFAULT_MAX_TOKENS}, at most a quarter of the context.
   */
  maxTokens?: number;
  /**
   * The model's context size in tokens; the conversation sent is shortened to fit it. Default: what the model
   * server reports (llama-server's `n_ctx`), else {@link DEFAULT_CONTEXT_TOKENS}.
   */
  contextTokens?: number;
  /** Answers cut off at `maxTokens` in a row (without code that could run) before the run stops with `truncated`. Default 2. */
  maxContinuations?: number;
  temperature?: number;
  /** Extra instructions placed between the fixed instructions and the module prompt. */
  instructions?: string;
  /** Bounds of each observation sent back to the model. */
  observation?: Partial<ObservationLimits>;
  /** Defaults merged into every execute request (e.g. `timeoutMs`, `typeCheck`). */
  execute?: Omit<ExecuteRequest, "code">;
}

import { DEFAULT_MAX_TOKENS, STOP_REASONS, type StopReason } from "./stop-reasons.ts";

export { DEFAULT_MAX_TOKENS, STOP_REASONS, type StopReason };

/** Token and cost totals of a run. */
export interface AgentUsage {
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  /** US dollars, from the model's price table (0 for unknown models). */
  cost: number;
}

/** Events streamed while the agent runs, in order: `run-start`, then per step text/messages/code/executions, then `run-end`. */
export type AgentEvent =
  | { type: "run-start"; sessionId: string | undefined; task: string | undefined; model: string }
  | { type: "text-delta"; step: number; delta: string }
  | { type: "message"; message: ConversationMessage }
  | { type: "code"; step: number; code: string; source: CodeSource; toolCallId?: string }
  | { type: "execution"; step: number; execution: Execution; observation: string }
  | {
      /** The code paused: a host call waits for a person's yes (one event per request; the run ends `pending`). */
      type: "approval-request";
      step: number;
      request: Extract<PendingRequest, { kind: "approval" }>;
    }
  | {
      /** The code paused: it asked a question with `moss.ask` (one event per request; the run ends `pending`). */
      type: "clarification-request";
      step: number;
      request: Extract<PendingRequest, { kind: "clarification" }>;
    }
  | {
      /** What was sent to the model was shortened to fit its context (the conversation itself keeps everything). */
      type: "context-trimmed";
      step: number;
      trim: ContextTrim;
      contextTokens: number;
      message: string;
    }
  | {
      /** Something the model did wrong that the agent told it about (`cut-off`, `unclear-answer`), or a retry. */
      type: "notice";
      step: number;
      kind: "cut-off" | "unclear-answer" | "context-overflow" | "pending-abandoned";
      message: string;
    }
  | { type: "error"; error: unknown; message: string }
  | {
      type: "run-end";
      stopReason: StopReason;
      /** One sentence saying why the run stopped. */
      reason: string;
      answer: string | undefined;
      steps: number;
      usage: AgentUsage;
      /** What the paused run waits for when `stopReason` is `pending`. */
      pending?: PendingRequest[];
    };

/** What a run returns once finished (the same facts as its `run-end` event). */
export interface AgentRunResult {
  stopReason: StopReason;
  /** One sentence saying why the run stopped. */
  reason: string;
  /** The model's final text when it stopped by answering without code. */
  answer: string | undefined;
  steps: number;
  usage: AgentUsage;
  /** The error that ended the run when `stopReason` is `error`. */
  error?: unknown;
  /** What the paused run waits for when `stopReason` is `pending`: answer each by id with {@link MossAgent.resume}. */
  pending?: PendingRequest[];
}

/** Per-run options. */
export interface AgentRunOptions {
  signal?: AbortSignal;
  onEvent?: (event: AgentEvent) => void;
}

interface Action {
  toolCall?: ToolCall;
  extracted: ExtractedCode;
}

/** How a loop starts: a new task, a retry of an assistant message, or the answers a paused run waits for. */
type LoopStart =
  | { kind: "task"; task: string }
  | { kind: "retry"; message: ConversationMessage }
  | { kind: "resume"; answers: Answers };

/**
 * A paused step, kept in the metadata (`pending`) of the conversation's head while it waits, so it is saved with
 * the session and a new agent with the same session resumes it.
 */
interface PendingStep {
  continuation: string;
  requests: PendingRequest[];
  /** The assistant message whose actions were running. */
  assistantId: string;
  /** Which of its actions paused; the ones after it run once it is resumed. */
  actionIndex: number;
  step: number;
  code: string;
  toolCallId?: string;
  /** Whether an action of the same step before this one failed. */
  failedBefore: boolean;
  /** The answer was cut off at this output limit (its actions that are not code are told so). */
  cutOffAt?: number;
}

/** What running a step's actions came to. */
type ActionsOutcome = { failed: boolean; pending?: PendingRequest[] };

/** The observation that closes a paused step that will not resume. */
function notResumedObservation(why: string): string {
  return `<execution ok="false">\n<error kind="not-resumed">\nThis code paused, waiting for a person, and ${why}. Nothing it did persisted.\n</error>\n</execution>`;
}

/** The output limit and the prompt budget of one run. */
interface RunWindow {
  contextTokens: number;
  maxTokens: number;
  budgetTokens: number;
  /** Our token count ÷ the server's, learnt from a context overflow (1 until then). */
  scale: number;
}

const ANNOUNCES_MORE =
  /^(?:let me(?! know)|let's|let us|i will|i'll|i am going to|i'm going to|now,? i|next,? i|first,? i)\b/i;

/**
 * Why an answer without code is not a clear final answer, or undefined when it is one: an empty answer, one
 * with code blocks in another language, or one that announces a next step (ends with a colon, or its last line
 * starts "Let me", "I'll", …) did not finish the task.
 */
export function unclearAnswer(content: string): string | undefined {
  const text = content.trim();
  if (text === "") return "was empty";
  const fence = /^\s*(?:```|~~~)\s*([\w+-]*)/m.exec(text);
  if (fence !== null) {
    return `held a ${fence[1] ? `\`${fence[1]}\` ` : ""}code block but no TypeScript \`main(moss)\` that could run`;
  }
  const lastLine = text.split("\n").at(-1)!.trim();
  if (/[:：]$/.test(text) || /(?:\.\.\.|…)$/.test(text) || ANNOUNCES_MORE.test(lastLine)) {
    return "announced a next step but held no code to run";
  }
  return undefined;
}

/** The one-line summary of a context trim, for the `context-trimmed` event. */
function describeTrim(trim: ContextTrim, contextTokens: number): string {
  const parts: string[] = [];
  if (trim.shortenedObservations > 0)
    parts.push(`shortened ${trim.shortenedObservations} old observation(s)`);
  if (trim.droppedMessages > 0) parts.push(`left out ${trim.droppedMessages} old message(s)`);
  if (trim.shortenedLatest) parts.push("cut the latest step");
  return `The conversation (${trim.tokensBefore} tokens) does not fit the context of ${contextTokens} tokens (${trim.budgetTokens} for the prompt): ${parts.join(", ") || "nothing could be shortened"}; ${trim.tokensAfter} tokens sent. The session keeps every message.`;
}

/**
 * The MOSS agent loop: prompt → model → code → execution → observation back to the model, until the model
 * answers without code, `maxSteps` is reached, `maxConsecutiveErrors` steps fail in a row, or the code pauses for a
 * person (`pending`: {@link MossAgent.resume} goes on with the answers). With a
 * `sessionId`, the MossContext and the conversation tree are saved after every step, so a new agent (in
 * another process) with the same id continues the session.
 */
export class MossAgent {
  readonly #options: MossAgentOptions;
  readonly #createRuntime: CreateRuntime;
  readonly #tools: boolean;
  #conversation = new Conversation();
  #loaded = false;
  #runtime: AgentRuntime | undefined;
  #running = false;

  constructor(options: MossAgentOptions) {
    const maxSteps = options.maxSteps ?? 10;
    const maxErrors = options.maxConsecutiveErrors ?? 3;
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
    this.#options = { ...options, maxSteps, maxConsecutiveErrors: maxErrors, maxContinuations };
    const { modulePath } = options;
    if (options.createRuntime !== undefined) {
      this.#createRuntime = options.createRuntime;
    } else if (modulePath !== undefined) {
      const moduleOptions: ModuleRuntimeOptions = {
        modulePath,
        ...(options.container === undefined ? {} : { container: options.container }),
        ...(options.compiler === undefined ? {} : { compiler: options.compiler }),
        ...(options.hostSetup === undefined ? {} : { hostSetup: options.hostSetup }),
      };
      this.#createRuntime = (context) => compileModuleRuntime(moduleOptions, context);
    } else {
      throw new MossError("invalid-argument", "MossAgent needs a modulePath (or a createRuntime function).");
    }
    this.#tools = options.tools ?? true;
  }

  /** The conversation tree (loaded from the session's store on the first run). */
  get conversation(): Conversation {
    return this.#conversation;
  }

  /** Loads the session's conversation now instead of at the first run; returns it. */
  async load(): Promise<Conversation> {
    if (this.#loaded) return this.#conversation;
    const { sessionId, conversationStore } = this.#options;
    if (sessionId !== undefined && conversationStore !== undefined) {
      this.#conversation = (await conversationStore.load(sessionId)) ?? this.#conversation;
    }
    this.#loaded = true;
    return this.#conversation;
  }

  /** Runs the agent on a new task, continuing the conversation from its head. */
  run(task: string, options: AgentRunOptions = {}): Promise<AgentRunResult> {
    return this.#exclusive(() => this.#loop({ kind: "task", task }, options));
  }

  /**
   * What the session's paused run waits for (loaded from the session's store when needed), or undefined when
   * nothing waits. Answer each request by its id with {@link resume}.
   */
  async pending(): Promise<PendingRequest[] | undefined> {
    await this.load();
    return this.#pendingStep()?.requests;
  }

  /**
   * Continues the paused run with a person's answers (one per pending request, by id): the code runs again from
   * the start with them, the model sees its outcome as one observation, and the loop goes on. It may pause again.
   * Works in a new agent (another process) with the same session. Nothing paused is a MossError
   * (`invalid-argument`); a continuation the runtime refuses (expired, foreign) ends the run with `error` and
   * closes the paused step, so the session goes on with a new task.
   */
  resume(answers: Answers, options: AgentRunOptions = {}): Promise<AgentRunResult> {
    return this.#exclusive(async () => {
      await this.load();
      const pending = this.#pendingStep();
      if (pending === undefined) {
        const who =
          this.#options.sessionId === undefined ? "This agent" : `Session "${this.#options.sessionId}"`;
        throw new MossError(
          "invalid-argument",
          `${who} has no paused run to resume: resume() continues a run that stopped with "pending".`,
          { sessionId: this.#options.sessionId },
        );
      }
      checkAnswers(pending.requests, answers);
      return this.#loop({ kind: "resume", answers }, options);
    });
  }

  /**
   * Asks the model again for the last answer of the current thread (default) or for the assistant message
   * `messageId`: the new answer is a sibling branch of the old one, the runtime is rebuilt from the
   * MossContext as it was before the old answer ran, and the loop continues from there.
   */
  retry(messageId?: string, options: AgentRunOptions = {}): Promise<AgentRunResult> {
    return this.#exclusive(async () => {
      await this.load();
      const target =
        messageId === undefined
          ? [...this.#conversation.thread()].reverse().find((message) => message.role === "assistant")
          : this.#conversation.get(messageId);
      if (target === undefined || target.role !== "assistant") {
        throw new MossError(
          "invalid-argument",
          "retry() needs an assistant message to retry; the thread has none.",
          {
            messageId,
          },
        );
      }
      return this.#loop({ kind: "retry", message: target }, options);
    });
  }

  /** The same run as {@link run}, as an async iterable of its events (the iteration ends after `run-end`). */
  events(task: string, options: Omit<AgentRunOptions, "onEvent"> = {}): AsyncIterable<AgentEvent> {
    const queue: AgentEvent[] = [];
    let wake: (() => void) | undefined;
    let finished = false;
    let failure: unknown;
    const done = this.run(task, {
      ...options,
      onEvent: (event) => {
        queue.push(event);
        wake?.();
      },
    }).then(
      () => {
        finished = true;
        wake?.();
      },
      (error: unknown) => {
        failure = error ?? new Error("run failed");
        finished = true;
        wake?.();
      },
    );
    return {
      async *[Symbol.asyncIterator]() {
        while (true) {
          const event = queue.shift();
          if (event !== undefined) {
            yield event;
            continue;
          }
          if (finished) break;
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
        }
        await done;
        if (failure !== undefined) throw failure;
      },
    };
  }

  /** Closes the runtime; the agent can run again afterwards (a new runtime is built from the saved context). */
  async close(): Promise<void> {
    const runtime = this.#runtime;
    this.#runtime = undefined;
    await runtime?.close();
  }

  async #exclusive<T>(body: () => Promise<T>): Promise<T> {
    if (this.#running) {
      throw new MossError(
        "concurrent-execute",
        "This MossAgent is already running; wait for the current run to end.",
      );
    }
    this.#running = true;
    const { sessionId, store } = this.#options;
    const locks = sessionId !== undefined && store?.acquire !== undefined && store.release !== undefined;
    try {
      // The session is locked for the run, before any code runs: a run whose session cannot be written runs nothing.
      if (locks) await store!.acquire!(sessionId!);
      try {
        return await body();
      } finally {
        if (locks) await store!.release!(sessionId!);
      }
    } finally {
      this.#running = false;
    }
  }

  async #loop(start: LoopStart, options: AgentRunOptions): Promise<AgentRunResult> {
    const { model, sessionId } = this.#options;
    const maxSteps = this.#options.maxSteps!;
    const maxErrors = this.#options.maxConsecutiveErrors!;
    const maxContinuations = this.#options.maxContinuations!;
    const usage: AgentUsage = { modelCalls: 0, inputTokens: 0, outputTokens: 0, cost: 0 };
    const emit = (event: AgentEvent) => options.onEvent?.(event);
    let steps = 0;
    let stopReason: StopReason = "max-steps";
    let reason: string | undefined;
    let answer: string | undefined;
    let failure: unknown;
    let pending: PendingRequest[] | undefined;
    const task = start.kind === "task" ? start.task : undefined;

    emit({ type: "run-start", sessionId, task, model: model.model });
    try {
      await this.load();
      if (start.kind === "retry") await this.#rewindTo(start.message);
      const runtime = await this.#ensureRuntime();
      const system = buildSystemPrompt(await runtime.prompter().dumpModulePrompt(), {
        tools: this.#tools,
        ...(this.#options.instructions === undefined ? {} : { instructions: this.#options.instructions }),
      });
      const window = await this.#window();
      if (start.kind === "retry") await this.#persist(runtime);
      if (task !== undefined) {
        this.#closePending(emit, runtime, "a new task was given instead of answers");
        this.#appendTask(emit, task, runtime.dumpContext());
        await this.#persist(runtime);
      }
      let consecutiveErrors = 0;
      let cutOffs = 0;
      let toldUnclear = false;
      if (start.kind === "resume") {
        const outcome = await this.#resume(runtime, start.answers, emit);
        await this.#persist(runtime);
        pending = outcome.pending;
        consecutiveErrors = outcome.failed ? 1 : 0;
      }
      while (true) {
        if (pending !== undefined) {
          stopReason = "pending";
          reason = `the code waits for a person: ${pending.length} request(s) to answer`;
          break;
        }
        if (options.signal?.aborted) {
          stopReason = "aborted";
          break;
        }
        if (steps >= maxSteps) {
          stopReason = "max-steps";
          reason = `the step limit of ${maxSteps} model call(s) was reached before the model answered`;
          break;
        }
        steps += 1;
        const response = await this.#ask(system, window, steps, options.signal, emit);
        usage.modelCalls += 1;
        usage.inputTokens += response.inputTokens;
        usage.outputTokens += response.outputTokens;
        usage.cost += response.cost;
        const assistant = this.#append(emit, "assistant", response.content, {
          toolCalls: response.toolCalls,
          model: response.model,
          finishReason: response.finishReason,
          inputTokens: response.inputTokens,
          outputTokens: response.outputTokens,
          cost: response.cost,
          step: steps,
        });
        const cutOff = response.finishReason === "length";
        const actions = this.#actions(response);
        const runnable = actions.some((action) => action.extracted.kind === "code");
        if (cutOff && !runnable) {
          // A cut-off answer is never final and its incomplete code never runs: ask again, a bounded number of times.
          cutOffs += 1;
          if (cutOffs > maxContinuations) {
            this.#answerToolCalls(emit, response.toolCalls, cutOffNotice(window.maxTokens), runtime);
            await this.#persist(runtime);
            stopReason = "truncated";
            reason = `the model's answer was cut off at the output limit of ${window.maxTokens} tokens ${cutOffs} time(s) in a row (raise --max-tokens)`;
            break;
          }
          const notice = cutOffNotice(window.maxTokens);
          emit({ type: "notice", step: steps, kind: "cut-off", message: notice });
          if (response.toolCalls.length > 0) this.#answerToolCalls(emit, response.toolCalls, notice, runtime);
          else
            this.#append(emit, "user", notice, {
              kind: "notice",
              notice: "cut-off",
              context: runtime.dumpContext(),
            });
          await this.#persist(runtime);
          continue;
        }
        cutOffs = 0;
        if (actions.length === 0) {
          const unclear = unclearAnswer(stripReasoning(response.content));
          if (unclear === undefined) {
            await this.#persist(runtime);
            stopReason = "answer";
            answer = response.content;
            break;
          }
          if (toldUnclear) {
            await this.#persist(runtime);
            stopReason = "unclear-answer";
            reason = `the model's answer ${unclear}, also after being told once`;
            answer = response.content;
            break;
          }
          toldUnclear = true;
          const notice = unclearAnswerNotice(unclear, this.#tools);
          emit({ type: "notice", step: steps, kind: "unclear-answer", message: notice });
          this.#append(emit, "user", notice, {
            kind: "notice",
            notice: "unclear-answer",
            context: runtime.dumpContext(),
          });
          await this.#persist(runtime);
          continue;
        }
        // The answer is stored before its code runs: a run taken over mid-step resumes it, not asks again.
        await this.#persist(runtime);
        const outcome = await this.#runActions(runtime, actions, {
          assistantId: assistant.id,
          from: 0,
          step: steps,
          emit,
          failedBefore: false,
          ...(cutOff ? { cutOffAt: window.maxTokens } : {}),
        });
        await this.#persist(runtime);
        if (outcome.pending !== undefined) {
          pending = outcome.pending;
          continue;
        }
        consecutiveErrors = outcome.failed ? consecutiveErrors + 1 : 0;
        if (consecutiveErrors >= maxErrors) {
          stopReason = "max-consecutive-errors";
          reason = `${consecutiveErrors} steps in a row failed (the limit is ${maxErrors})`;
          break;
        }
      }
    } catch (error) {
      stopReason = options.signal?.aborted ? "aborted" : "error";
      failure = error;
      const text = error instanceof Error ? error.message : String(error);
      reason = stopReason === "aborted" ? undefined : text;
      emit({ type: "error", error, message: text });
      await this.#saveConversation().catch(() => undefined);
    }
    const why = reason ?? STOP_REASONS[stopReason];
    const waiting = stopReason === "pending" && pending !== undefined ? { pending } : {};
    emit({ type: "run-end", stopReason, reason: why, answer, steps, usage, ...waiting });
    return {
      stopReason,
      reason: why,
      answer,
      steps,
      usage,
      ...(failure === undefined ? {} : { error: failure }),
      ...waiting,
    };
  }

  /** The output limit and the prompt budget of this run: the context size from the options, the server or the default. */
  async #window(): Promise<RunWindow> {
    const contextTokens =
      this.#options.contextTokens ??
      (await this.#options.model.contextWindow?.().catch(() => undefined)) ??
      DEFAULT_CONTEXT_TOKENS;
    const window: RunWindow = { contextTokens, maxTokens: 0, budgetTokens: 0, scale: 1 };
    this.#resize(window, contextTokens);
    return window;
  }

  /** Sets the context size; a default output limit never takes more than a quarter of a small context. */
  #resize(window: RunWindow, contextTokens: number): void {
    window.contextTokens = contextTokens;
    window.maxTokens = this.#options.maxTokens ?? Math.min(DEFAULT_MAX_TOKENS, Math.floor(contextTokens / 4));
    window.budgetTokens = Math.floor(promptBudget(contextTokens, window.maxTokens) * window.scale);
    if (window.budgetTokens < 1) {
      throw new MossError(
        "invalid-argument",
        `maxTokens (${window.maxTokens}) leaves no room for the prompt in a context of ${contextTokens} tokens.`,
      );
    }
  }

  /** Appends the task, unless the head is the same task still unanswered; a different unanswered task is replaced by a sibling. */
  #appendTask(emit: (event: AgentEvent) => void, task: string, context: MossContext): void {
    const head = this.#conversation.head;
    if (head?.role === "user" && head.metadata.kind === "task") {
      if (head.content === task) return;
      const message = this.#conversation.attach(head.parentId, "user", task, { kind: "task", context });
      emit({ type: "message", message });
      return;
    }
    this.#append(emit, "user", task, { kind: "task", context });
  }

  /** Answers each tool call of a message that will not run with `content` (tool messages keep the chat well-formed). */
  #answerToolCalls(
    emit: (event: AgentEvent) => void,
    toolCalls: ToolCall[],
    content: string,
    runtime: AgentRuntime,
  ): void {
    for (const call of toolCalls) {
      this.#append(emit, "tool", content, {
        kind: "observation",
        ok: false,
        errorKind: "cut-off",
        toolCallId: call.id,
        context: runtime.dumpContext(),
      });
    }
  }

  async #ask(
    system: string,
    window: RunWindow,
    step: number,
    signal: AbortSignal | undefined,
    emit: (event: AgentEvent) => void,
  ): Promise<LanguageModelResponse> {
    let budget = window.budgetTokens;
    let overflow: unknown;
    for (let attempt = 0; ; attempt++) {
      let fitted: ReturnType<typeof fitContext>;
      try {
        fitted = fitContext({ role: "system", content: system }, this.#windowEntries(), budget);
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
        ...(this.#tools ? { tools: [MOSS_TOOL] } : {}),
        maxTokens: window.maxTokens,
        ...(this.#options.temperature === undefined ? {} : { temperature: this.#options.temperature }),
        ...(signal === undefined ? {} : { signal }),
      };
      try {
        if (this.#options.stream === false) return await this.#options.model.generate(request);
        return await this.#options.model.stream(request, (delta) =>
          emit({ type: "text-delta", step, delta }),
        );
      } catch (error) {
        if (MossError.is(error) && error.details.partial !== undefined) {
          this.#abandon(error.details.partial as PartialResponse, String(error.details.reason), step);
          await this.#saveConversation().catch(() => undefined);
        }
        if (attempt > 0 || !MossError.is(error) || error.details.reason !== "context-overflow") throw error;
        // The server counts more tokens than we do, or its context is smaller than we were told: adopt what it
        // says for the rest of the run, shorten harder than what failed, and ask once more.
        overflow = error;
        const sent = requestTokens(messages);
        const theirs = error.details.promptTokens;
        const theirContext = error.details.contextTokens;
        window.scale *= typeof theirs === "number" && theirs > sent ? sent / theirs : 0.7;
        this.#resize(
          window,
          typeof theirContext === "number" && theirContext < window.contextTokens
            ? theirContext
            : window.contextTokens,
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

  /** Keeps a partial answer (a cut or broken stream) as an abandoned branch: the head stays, so a retry starts clean. */
  #abandon(partial: PartialResponse, reason: string, step: number): void {
    const head = this.#conversation.head;
    this.#conversation.attach(head?.id, "assistant", partial.content, {
      abandoned: reason,
      toolCalls: partial.toolCalls,
      chunks: partial.chunks,
      step,
    });
    this.#conversation.checkout(head?.id);
  }

  #actions(response: Pick<LanguageModelResponse, "content" | "toolCalls">): Action[] {
    if (response.toolCalls.length > 0) {
      return response.toolCalls.map((toolCall) => ({
        toolCall,
        extracted:
          toolCall.name === MOSS_TOOL.name
            ? extractToolCode(toolCall.arguments)
            : {
                kind: "invalid",
                reason: `There is no tool named "${toolCall.name}"; the only tool is "${MOSS_TOOL.name}".`,
              },
      }));
    }
    // Servers that do not parse tool calls pass them through as text; models also answer with fences in tool mode.
    const content = stripReasoning(response.content);
    const text = extractTextToolCalls(content);
    if (text.kind === "invalid") return [{ extracted: text }];
    if (text.kind === "calls") {
      return text.calls.map((call) => {
        if (call.name !== MOSS_TOOL.name) {
          return {
            extracted: {
              kind: "invalid",
              reason: `There is no tool named "${call.name}"; the only tool is "${MOSS_TOOL.name}".`,
            },
          };
        }
        const extracted = extractToolCode(call.arguments);
        return { extracted: extracted.kind === "code" ? { ...extracted, source: "tool-text" } : extracted };
      });
    }
    const extracted = extractProseCode(content);
    return extracted.kind === "none" ? [] : [{ extracted }];
  }

  /**
   * Runs a step's actions from index `from`, appending an observation after each. Stops at the first that
   * pauses: that one is recorded as the pending step (on the conversation's head) and its requests emitted.
   */
  async #runActions(
    runtime: AgentRuntime,
    actions: Action[],
    at: {
      assistantId: string;
      from: number;
      step: number;
      emit: (event: AgentEvent) => void;
      failedBefore: boolean;
      cutOffAt?: number;
    },
  ): Promise<ActionsOutcome> {
    let failed = at.failedBefore;
    for (let index = at.from; index < actions.length; index++) {
      const action = actions[index]!;
      const outcome = await this.#act(runtime, action, at.step, at.emit, at.cutOffAt);
      if (outcome.paused !== undefined) {
        const pending: PendingStep = {
          continuation: outcome.paused.continuation,
          requests: outcome.paused.requests,
          assistantId: at.assistantId,
          actionIndex: index,
          step: at.step,
          code: outcome.code,
          ...(action.toolCall === undefined ? {} : { toolCallId: action.toolCall.id }),
          failedBefore: failed,
          ...(at.cutOffAt === undefined ? {} : { cutOffAt: at.cutOffAt }),
        };
        this.#pause(pending, at.emit);
        return { failed, pending: pending.requests };
      }
      if (!outcome.ok) failed = true;
    }
    return { failed };
  }

  /** Keeps `pending` on the conversation's head (saved with the session) and emits one event per request. */
  #pause(pending: PendingStep, emit: (event: AgentEvent) => void): void {
    const head = this.#conversation.head!;
    this.#conversation.update(head.id, { pending });
    for (const request of pending.requests) {
      if (request.kind === "approval") emit({ type: "approval-request", step: pending.step, request });
      else emit({ type: "clarification-request", step: pending.step, request });
    }
  }

  /** The paused step the conversation's head waits on, if any. */
  #pendingStep(): PendingStep | undefined {
    const pending = this.#conversation.head?.metadata.pending as PendingStep | undefined;
    return pending !== undefined && typeof pending.continuation === "string" ? pending : undefined;
  }

  /**
   * Resumes the paused step with the answers: its outcome is appended as the one observation of the paused code,
   * then the step's remaining actions run. A refused continuation closes the step (so the thread stays
   * well-formed) and is rethrown.
   */
  async #resume(
    runtime: AgentRuntime,
    answers: Answers,
    emit: (event: AgentEvent) => void,
  ): Promise<ActionsOutcome> {
    const pending = this.#pendingStep()!;
    if (runtime.resume === undefined) {
      throw new MossError(
        "invalid-argument",
        "This agent's runtime cannot resume a paused run (it has no resume()).",
      );
    }
    const { timeoutMs, limits } = this.#options.execute ?? {};
    const resumeLimits = { ...limits, ...(timeoutMs === undefined ? {} : { wallTimeMs: timeoutMs }) };
    let execution: Execution;
    try {
      execution = await runtime.resume(
        pending.continuation,
        answers,
        Object.keys(resumeLimits).length === 0 ? {} : { limits: resumeLimits },
      );
    } catch (error) {
      if (MossError.is(error) && error.code === "continuation-invalid") {
        this.#closePending(emit, runtime, `could not be resumed (${error.message})`);
        await this.#persist(runtime);
      }
      throw error;
    }
    const head = this.#conversation.head!;
    const observation = renderObservation(execution, this.#options.observation);
    emit({ type: "execution", step: pending.step, execution, observation });
    if (execution.pending !== undefined) {
      this.#pause(
        { ...pending, continuation: execution.pending.continuation, requests: execution.pending.requests },
        emit,
      );
      return { failed: pending.failedBefore, pending: execution.pending.requests };
    }
    this.#conversation.update(head.id, { pending: undefined });
    this.#observe(emit, observation, pending.toolCallId, {
      kind: "observation",
      ok: execution.ok,
      code: pending.code,
      resumed: true,
      ...(execution.error === undefined ? {} : { errorKind: execution.error.kind }),
      context: execution.context,
    });
    const assistant = this.#conversation.get(pending.assistantId);
    const actions = this.#actions({
      content: assistant.content,
      toolCalls: (assistant.metadata.toolCalls as ToolCall[] | undefined) ?? [],
    });
    return this.#runActions(runtime, actions, {
      assistantId: pending.assistantId,
      from: pending.actionIndex + 1,
      step: pending.step,
      emit,
      failedBefore: pending.failedBefore || !execution.ok,
      ...(pending.cutOffAt === undefined ? {} : { cutOffAt: pending.cutOffAt }),
    });
  }

  /**
   * Closes a paused step that will not resume: the paused code and the step's actions after it get an observation
   * saying so (every tool call keeps its answer), and the head no longer waits.
   */
  #closePending(emit: (event: AgentEvent) => void, runtime: AgentRuntime, why: string): void {
    const pending = this.#pendingStep();
    if (pending === undefined) return;
    const head = this.#conversation.head!;
    this.#conversation.update(head.id, { pending: undefined });
    const message = `The paused run of step ${pending.step} ${why}; nothing it did persisted.`;
    emit({ type: "notice", step: pending.step, kind: "pending-abandoned", message });
    const context = runtime.dumpContext();
    this.#observe(emit, notResumedObservation(why), pending.toolCallId, {
      kind: "observation",
      ok: false,
      code: pending.code,
      errorKind: "not-resumed",
      context,
    });
    const assistant = this.#conversation.get(pending.assistantId);
    const toolCalls = (assistant.metadata.toolCalls as ToolCall[] | undefined) ?? [];
    const later = toolCalls.slice(
      toolCalls.findIndex((call) => call.id === pending.toolCallId) + 1 || toolCalls.length,
    );
    for (const call of later) {
      this.#observe(emit, notResumedObservation("so this later call did not run"), call.id, {
        kind: "observation",
        ok: false,
        errorKind: "not-resumed",
        context,
      });
    }
  }

  /** Runs one action and appends its observation; returns whether it succeeded, or the pause of its code. */
  async #act(
    runtime: AgentRuntime,
    action: Action,
    step: number,
    emit: (event: AgentEvent) => void,
    cutOffAt: number | undefined,
  ): Promise<{ ok: boolean; paused?: undefined } | { ok: false; paused: PendingRun; code: string }> {
    const { extracted, toolCall } = action;
    let observation: string;
    let metadata: Record<string, unknown>;
    let ok: boolean;
    if (extracted.kind === "code") {
      emit({
        type: "code",
        step,
        code: extracted.code,
        source: extracted.source,
        ...(toolCall === undefined ? {} : { toolCallId: toolCall.id }),
      });
      const execution = await runtime.execute({ ...this.#options.execute, code: extracted.code });
      observation = renderObservation(execution, this.#options.observation);
      emit({ type: "execution", step, execution, observation });
      // A paused run gets its observation when it resumes: the model sees the outcome once, whole.
      if (execution.pending !== undefined)
        return { ok: false, paused: execution.pending, code: extracted.code };
      ok = execution.ok;
      metadata = {
        kind: "observation",
        ok,
        code: extracted.code,
        ...(execution.error === undefined ? {} : { errorKind: execution.error.kind }),
        context: execution.context,
      };
    } else {
      const why =
        cutOffAt !== undefined
          ? `Your answer was cut off at the output limit of ${cutOffAt} tokens before this call was complete.`
          : extracted.kind === "invalid"
            ? extracted.reason
            : "No code was found.";
      observation = `<execution ok="false">\n<error kind="no-code">\n${why}\n</error>\n</execution>`;
      ok = false;
      metadata = { kind: "observation", ok, errorKind: "no-code", context: runtime.dumpContext() };
    }
    this.#observe(emit, observation, toolCall?.id, metadata);
    return { ok };
  }

  /** Appends an observation: a tool message answering `toolCallId`, or a user message when the code came as text. */
  #observe(
    emit: (event: AgentEvent) => void,
    observation: string,
    toolCallId: string | undefined,
    metadata: Record<string, unknown>,
  ): void {
    if (toolCallId !== undefined) this.#append(emit, "tool", observation, { ...metadata, toolCallId });
    else this.#append(emit, "user", observation, metadata);
  }

  #append(
    emit: (event: AgentEvent) => void,
    role: ConversationMessage["role"],
    content: string,
    metadata: Record<string, unknown>,
  ): ConversationMessage {
    const message = this.#conversation.append(role, content, metadata);
    emit({ type: "message", message });
    return message;
  }

  /** The current thread as chat messages, each marked for the context window (abandoned branches are not on it). */
  #windowEntries(): WindowEntry[] {
    const entries: WindowEntry[] = [];
    for (const message of this.#conversation.thread()) {
      switch (message.role) {
        case "system":
          entries.push({ message: { role: "system", content: message.content }, kind: "turn" });
          break;
        case "user":
          entries.push({
            message: { role: "user", content: message.content },
            kind:
              message.metadata.kind === "task" || message.metadata.kind === undefined
                ? "task"
                : "observation",
          });
          break;
        case "assistant": {
          const toolCalls = message.metadata.toolCalls as ToolCall[] | undefined;
          entries.push({
            message:
              toolCalls !== undefined && toolCalls.length > 0
                ? { role: "assistant", content: message.content, toolCalls }
                : { role: "assistant", content: message.content },
            kind: "turn",
          });
          break;
        }
        case "tool":
          entries.push({
            message: {
              role: "tool",
              content: message.content,
              toolCallId: String(message.metadata.toolCallId),
            },
            kind: "observation",
          });
          break;
      }
    }
    return entries;
  }

  /** Moves the head to the parent of `assistant` and rebuilds the runtime from the context saved at that point. */
  async #rewindTo(assistant: ConversationMessage): Promise<void> {
    const thread = this.#conversation.thread(assistant.parentId);
    const snapshot = [...thread].reverse().find((message) => message.metadata.context !== undefined);
    this.#conversation.checkout(assistant.parentId);
    await this.close();
    this.#runtime = await this.#createRuntime(snapshot?.metadata.context as MossContext | undefined);
  }

  async #ensureRuntime(): Promise<AgentRuntime> {
    if (this.#runtime !== undefined) return this.#runtime;
    const { sessionId, store } = this.#options;
    const saved = sessionId !== undefined && store !== undefined ? await store.load(sessionId) : undefined;
    this.#runtime = await this.#createRuntime(saved);
    return this.#runtime;
  }

  async #persist(runtime: AgentRuntime): Promise<void> {
    const { sessionId, store } = this.#options;
    if (sessionId !== undefined && store !== undefined) await store.save(sessionId, runtime.dumpContext());
    await this.#saveConversation();
  }

  async #saveConversation(): Promise<void> {
    const { sessionId, conversationStore } = this.#options;
    if (sessionId !== undefined && conversationStore !== undefined) {
      await conversationStore.save(sessionId, this.#conversation);
    }
  }
}

/** Checks that `answers` answer every pending request, each with the right kind of answer, and nothing else. */
function checkAnswers(requests: PendingRequest[], answers: Answers): void {
  if (answers === null || typeof answers !== "object") {
    throw new MossError("invalid-argument", "resume() needs the answers as an object keyed by request id.");
  }
  const ids = requests.map((request) => request.id);
  const unknown = Object.keys(answers).filter((id) => !ids.includes(id));
  if (unknown.length > 0) {
    throw new MossError(
      "invalid-argument",
      `No pending request has the id ${unknown.map((id) => `"${id}"`).join(", ")}; the run waits for ${ids.map((id) => `"${id}"`).join(", ")}.`,
      { unknown, pending: ids },
    );
  }
  const missing = ids.filter((id) => answers[id] === undefined);
  if (missing.length > 0) {
    throw new MossError(
      "invalid-argument",
      `Every pending request needs an answer; none was given for ${missing.map((id) => `"${id}"`).join(", ")}.`,
      { missing, pending: ids },
    );
  }
  for (const request of requests) {
    const answer = answers[request.id] as Record<string, unknown>;
    const fits =
      request.kind === "approval"
        ? typeof answer?.approved === "boolean" &&
          (answer.reason === undefined || typeof answer.reason === "string")
        : typeof answer?.answer === "string";
    if (!fits) {
      throw new MossError(
        "invalid-argument",
        request.kind === "approval"
          ? `Request "${request.id}" asks to approve a call: answer it with { approved: true } or { approved: false, reason?: string }.`
          : `Request "${request.id}" asks a question: answer it with { answer: string }.`,
        { id: request.id, answer },
      );
    }
    if (request.kind === "clarification" && request.choices !== undefined) {
      const text = (answer as { answer: string }).answer;
      if (!request.choices.includes(text)) {
        throw new MossError(
          "invalid-argument",
          `Request "${request.id}" asks to pick one of ${request.choices.map((choice) => JSON.stringify(choice)).join(", ")}; got ${JSON.stringify(text)}.`,
          { id: request.id, answer },
        );
      }
    }
  }
}
