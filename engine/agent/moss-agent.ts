import type { Container } from "../../container/index.ts";
import { MossError } from "../errors.ts";
import type { ExecuteRequest, Execution, MossContext } from "../types.ts";
import { buildSystemPrompt, MOSS_TOOL } from "./agent-prompt.ts";
import { Conversation, type ConversationMessage } from "./conversation.ts";
import type { ConversationStore } from "./conversation-store.ts";
import { type ExtractedCode, extractProseCode, extractToolCode } from "./extract-code.ts";
import type { ChatMessage, LanguageModel, LanguageModelResponse, ToolCall } from "./language-model.ts";
import { compileModuleRuntime, type ModuleRuntimeOptions } from "./module-runtime.ts";
import { type ObservationLimits, renderObservation } from "./observation.ts";

/** What the agent needs of a MossRuntime (MossRuntime satisfies it). */
export interface AgentRuntime {
  execute(request: ExecuteRequest): Promise<Execution>;
  prompter(): { dumpModulePrompt(): Promise<string> };
  dumpContext(): MossContext;
  close(): Promise<void>;
}

/** What the agent needs of a ContextStore (FileContextStore satisfies it). */
export interface AgentContextStore {
  load(sessionId: string): Promise<MossContext | undefined>;
  save(sessionId: string, context: MossContext): Promise<unknown>;
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
  maxTokens?: number;
  temperature?: number;
  /** Extra instructions placed between the fixed instructions and the module prompt. */
  instructions?: string;
  /** Bounds of each observation sent back to the model. */
  observation?: Partial<ObservationLimits>;
  /** Defaults merged into every execute request (e.g. `timeoutMs`, `typeCheck`). */
  execute?: Omit<ExecuteRequest, "code">;
}

/** Why a run ended. */
export type StopReason = "answer" | "max-steps" | "max-consecutive-errors" | "error" | "aborted";

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
  | { type: "code"; step: number; code: string; source: "tool" | "fence" | "bare"; toolCallId?: string }
  | { type: "execution"; step: number; execution: Execution; observation: string }
  | { type: "error"; error: unknown; message: string }
  | {
      type: "run-end";
      stopReason: StopReason;
      answer: string | undefined;
      steps: number;
      usage: AgentUsage;
    };

/** What a run returns once finished (the same facts as its `run-end` event). */
export interface AgentRunResult {
  stopReason: StopReason;
  /** The model's final text when it stopped by answering without code. */
  answer: string | undefined;
  steps: number;
  usage: AgentUsage;
  /** The error that ended the run when `stopReason` is `error`. */
  error?: unknown;
}

/** Per-run options. */
export interface AgentRunOptions {
  signal?: AbortSignal;
  onEvent?: (event: AgentEvent) => void;
}

/** Answers a tool call whose run was interrupted (an error ended the run before it executed). */
const INTERRUPTED_OBSERVATION =
  '<execution ok="false">\n<error kind="interrupted">\nThe run was interrupted before this code ran.\n</error>\n</execution>';

interface Action {
  toolCall?: ToolCall;
  extracted: ExtractedCode;
}

/**
 * The MOSS agent loop: prompt → model → code → execution → observation back to the model, until the model
 * answers without code, `maxSteps` is reached, or `maxConsecutiveErrors` steps fail in a row. With a
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
    this.#options = { ...options, maxSteps, maxConsecutiveErrors: maxErrors };
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
    return this.#exclusive(() => this.#loop(task, undefined, options));
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
      return this.#loop(undefined, target, options);
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
    try {
      return await body();
    } finally {
      this.#running = false;
    }
  }

  async #loop(
    task: string | undefined,
    retryOf: ConversationMessage | undefined,
    options: AgentRunOptions,
  ): Promise<AgentRunResult> {
    const { model, sessionId } = this.#options;
    const maxSteps = this.#options.maxSteps!;
    const maxErrors = this.#options.maxConsecutiveErrors!;
    const usage: AgentUsage = { modelCalls: 0, inputTokens: 0, outputTokens: 0, cost: 0 };
    const emit = (event: AgentEvent) => options.onEvent?.(event);
    let steps = 0;
    let stopReason: StopReason = "max-steps";
    let answer: string | undefined;
    let failure: unknown;

    emit({ type: "run-start", sessionId, task, model: model.model });
    try {
      await this.load();
      if (retryOf !== undefined) await this.#rewindTo(retryOf);
      const runtime = await this.#ensureRuntime();
      const system = buildSystemPrompt(await runtime.prompter().dumpModulePrompt(), {
        tools: this.#tools,
        ...(this.#options.instructions === undefined ? {} : { instructions: this.#options.instructions }),
      });
      if (retryOf !== undefined) await this.#persist(runtime);
      if (task !== undefined) {
        this.#append(emit, "user", task, { kind: "task", context: runtime.dumpContext() });
        await this.#persist(runtime);
      }
      let consecutiveErrors = 0;
      while (true) {
        if (options.signal?.aborted) {
          stopReason = "aborted";
          break;
        }
        if (steps >= maxSteps) {
          stopReason = "max-steps";
          break;
        }
        steps += 1;
        const response = await this.#ask(system, steps, options.signal, emit);
        usage.modelCalls += 1;
        usage.inputTokens += response.inputTokens;
        usage.outputTokens += response.outputTokens;
        usage.cost += response.cost;
        this.#append(emit, "assistant", response.content, {
          toolCalls: response.toolCalls,
          model: response.model,
          finishReason: response.finishReason,
          inputTokens: response.inputTokens,
          outputTokens: response.outputTokens,
          cost: response.cost,
          step: steps,
        });
        const actions = this.#actions(response);
        if (actions.length === 0) {
          await this.#persist(runtime);
          stopReason = "answer";
          answer = response.content;
          break;
        }
        let stepFailed = false;
        for (const action of actions) {
          const ok = await this.#act(runtime, action, steps, emit);
          if (!ok) stepFailed = true;
        }
        await this.#persist(runtime);
        consecutiveErrors = stepFailed ? consecutiveErrors + 1 : 0;
        if (consecutiveErrors >= maxErrors) {
          stopReason = "max-consecutive-errors";
          break;
        }
      }
    } catch (error) {
      stopReason = options.signal?.aborted ? "aborted" : "error";
      failure = error;
      const text = error instanceof Error ? error.message : String(error);
      emit({ type: "error", error, message: text });
      await this.#saveConversation().catch(() => undefined);
    }
    emit({ type: "run-end", stopReason, answer, steps, usage });
    return { stopReason, answer, steps, usage, ...(failure === undefined ? {} : { error: failure }) };
  }

  async #ask(
    system: string,
    step: number,
    signal: AbortSignal | undefined,
    emit: (event: AgentEvent) => void,
  ): Promise<LanguageModelResponse> {
    const request = {
      messages: [{ role: "system", content: system } as ChatMessage, ...this.#chatMessages()],
      ...(this.#tools ? { tools: [MOSS_TOOL] } : {}),
      ...(this.#options.maxTokens === undefined ? {} : { maxTokens: this.#options.maxTokens }),
      ...(this.#options.temperature === undefined ? {} : { temperature: this.#options.temperature }),
      ...(signal === undefined ? {} : { signal }),
    };
    if (this.#options.stream === false) return this.#options.model.generate(request);
    return this.#options.model.stream(request, (delta) => emit({ type: "text-delta", step, delta }));
  }

  #actions(response: LanguageModelResponse): Action[] {
    if (this.#tools) {
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
    const extracted = extractProseCode(response.content);
    return extracted.kind === "none" ? [] : [{ extracted }];
  }

  /** Runs one action and appends its observation; returns whether it succeeded. */
  async #act(
    runtime: AgentRuntime,
    action: Action,
    step: number,
    emit: (event: AgentEvent) => void,
  ): Promise<boolean> {
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
      ok = execution.ok;
      metadata = {
        kind: "observation",
        ok,
        code: extracted.code,
        ...(execution.error === undefined ? {} : { errorKind: execution.error.kind }),
        context: execution.context,
      };
    } else {
      observation = `<execution ok="false">\n<error kind="no-code">\n${extracted.kind === "invalid" ? extracted.reason : "No code was found."}\n</error>\n</execution>`;
      ok = false;
      metadata = { kind: "observation", ok, errorKind: "no-code", context: runtime.dumpContext() };
    }
    if (toolCall !== undefined) {
      this.#append(emit, "tool", observation, { ...metadata, toolCallId: toolCall.id });
    } else {
      this.#append(emit, "user", observation, metadata);
    }
    return ok;
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

  #chatMessages(): ChatMessage[] {
    const messages: ChatMessage[] = [];
    let unanswered: ToolCall[] = [];
    const closeUnanswered = () => {
      for (const call of unanswered) {
        messages.push({ role: "tool", content: INTERRUPTED_OBSERVATION, toolCallId: call.id });
      }
      unanswered = [];
    };
    for (const message of this.#conversation.thread()) {
      if (message.role === "tool") {
        unanswered = unanswered.filter((call) => call.id !== message.metadata.toolCallId);
      } else {
        closeUnanswered();
      }
      switch (message.role) {
        case "system":
        case "user":
          messages.push({ role: message.role, content: message.content });
          break;
        case "assistant": {
          const toolCalls = message.metadata.toolCalls as ToolCall[] | undefined;
          unanswered = [...(toolCalls ?? [])];
          messages.push(
            toolCalls !== undefined && toolCalls.length > 0
              ? { role: "assistant", content: message.content, toolCalls }
              : { role: "assistant", content: message.content },
          );
          break;
        }
        case "tool":
          messages.push({
            role: "tool",
            content: message.content,
            toolCallId: String(message.metadata.toolCallId),
          });
          break;
      }
    }
    closeUnanswered();
    return messages;
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
