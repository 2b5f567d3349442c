import { checkAnswers } from "../answers.ts";
import { MossError } from "../errors.ts";
import { toImageContent } from "../image-content.ts";
import {
  Conversation,
  type ConversationMessage,
  type PartialResponse,
  type ToolCall,
} from "../model/index.ts";
import type { Answers, Execution, ImageContent, MossContext, PendingRequest } from "../types.ts";
import { buildSystemPrompt, cutOffNotice, unclearAnswerNotice } from "./agent-prompt.ts";
import type {
  AgentEvent,
  AgentRunOptions,
  AgentRunResult,
  AgentRuntime,
  AgentTask,
  AgentUsage,
  CreateRuntime,
  MossAgentOptions,
} from "./agent-types.ts";
import { askModel } from "./ask-model.ts";
import { chatMessages } from "./chat-messages.ts";
import { type CheckedAgentOptions, checkAgentOptions } from "./check-agent-options.ts";
import { DEFAULT_CONTEXT_TOKENS } from "./context-window.ts";
import { eventStream } from "./event-stream.ts";
import { stripReasoning } from "./extract-code.ts";
import { moduleRuntimeFactory } from "./module-runtime.ts";
import { renderObservation } from "./observation.ts";
import { type PendingStep, pendingSteps } from "./pending-step.ts";
import { persistSession } from "./persist-session.ts";
import { runAction } from "./run-action.ts";
import { type RunWindow, sizeRunWindow } from "./run-window.ts";
import { type StepAction, stepActions } from "./step-actions.ts";
import { unclearAnswer } from "./unclear-answer.ts";

export type {
  AgentContextStore,
  AgentEvent,
  AgentRunOptions,
  AgentRunResult,
  AgentRuntime,
  AgentTask,
  AgentUsage,
  CreateRuntime,
  MossAgentOptions,
} from "./agent-types.ts";

import { DEFAULT_MAX_TOKENS, STOP_REASONS, type StopReason } from "../stop-reasons.ts";

export { unclearAnswer } from "./unclear-answer.ts";
export { DEFAULT_MAX_TOKENS, STOP_REASONS, type StopReason };

/** How a loop starts: a new task, a retry of an assistant message, or the answers a paused run waits for. */
type LoopStart =
  | { kind: "task"; task: string; images: ImageContent[] }
  | { kind: "retry"; message: ConversationMessage }
  | { kind: "resume"; answers: Answers };

/** What running a step's actions came to. */
type ActionsOutcome = { failed: boolean; pending?: PendingRequest[] };

/**
 * The MOSS agent loop: prompt → model → code → execution → observation back to the model, until the model
 * answers without code, `maxSteps` is reached, `maxConsecutiveErrors` steps fail in a row, or the code pauses for a
 * person (`pending`: {@link MossAgent.resume} goes on with the answers). With a
 * `sessionId`, the MossContext and the conversation tree are saved after every step, so a new agent (in
 * another process) with the same id continues the session.
 */
export class MossAgent {
  readonly #options: CheckedAgentOptions;
  readonly #createRuntime: CreateRuntime;
  #conversation = new Conversation();
  #loaded = false;
  #runtime: AgentRuntime | undefined;
  #running = false;
  /** The stop signal of the run in progress (see `AgentRunOptions.signal`): its code stops with it. */
  #signal: AbortSignal | undefined;

  constructor(options: MossAgentOptions) {
    this.#options = checkAgentOptions(options);
    this.#createRuntime = this.#options.createRuntime ?? moduleRuntimeFactory(this.#options);
  }

  /**
   * Turns a checkpoint of a step whose code was running when its process died (`onCheckpoint` of the runtime)
   * into the paused step of `conversation`'s head, so {@link resume} with no answers continues that step: the
   * runtime replays the host calls the checkpoint recorded instead of repeating them, and the model is not asked
   * again; in a step of several actions it continues at the action that was running (the completed ones each have
   * their observation stored). Resolves false (nothing changed) when the checkpoint is not the running action's.
   * The caller saves the conversation to the session's store.
   */
  static pendFromCheckpoint(conversation: Conversation, checkpoint: string): boolean {
    return pendingSteps.fromCheckpoint(conversation, checkpoint);
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

  /** Runs the agent on a new task (text, or `{ task, images }`), continuing the conversation from its head. */
  run(task: string | AgentTask, options: AgentRunOptions = {}): Promise<AgentRunResult> {
    let start: LoopStart;
    try {
      start = taskStart(task);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#exclusive(() => this.#loop(start, options));
  }

  /**
   * What the session's paused run waits for (loaded from the session's store when needed), or undefined when
   * nothing waits. Answer each request by its id with {@link resume}.
   */
  async pending(): Promise<PendingRequest[] | undefined> {
    await this.load();
    return pendingSteps.of(this.#conversation)?.requests;
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
      const pending = pendingSteps.of(this.#conversation);
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
  events(
    task: string | AgentTask,
    options: Omit<AgentRunOptions, "onEvent"> = {},
  ): AsyncIterable<AgentEvent> {
    return eventStream((onEvent) => this.run(task, { ...options, onEvent }));
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
    // The run's code stops with the run: its host calls see the signal, and none starts after it aborted.
    this.#signal = options.signal;
    const { model, sessionId } = this.#options;
    const { maxSteps, maxConsecutiveErrors: maxErrors, maxContinuations, tools } = this.#options;
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
        tools,
        ...(this.#options.instructions === undefined ? {} : { instructions: this.#options.instructions }),
      });
      const window = await this.#window();
      if (start.kind === "retry") await this.#persist(runtime);
      if (task !== undefined) {
        this.#closePending(emit, runtime, "a new task was given instead of answers");
        this.#appendTask(emit, task, start.kind === "task" ? start.images : [], runtime.dumpContext());
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
        const response = await askModel({
          model,
          system,
          window,
          entries: chatMessages(this.#conversation.thread()),
          tools,
          maxTokens: this.#options.maxTokens,
          temperature: this.#options.temperature,
          stream: this.#options.stream !== false,
          signal: options.signal,
          step: steps,
          emit,
          onPartial: async (partial, why) => {
            this.#abandon(partial, why, steps);
            await this.#saveConversation().catch(() => undefined);
          },
        });
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
        const actions = stepActions(response);
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
          const notice = unclearAnswerNotice(unclear, tools);
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
    return sizeRunWindow(contextTokens, this.#options.maxTokens);
  }

  /** Appends the task, unless the head is the same task still unanswered; a different unanswered task is replaced by a sibling. */
  #appendTask(
    emit: (event: AgentEvent) => void,
    task: string,
    images: ImageContent[],
    context: MossContext,
  ): void {
    const head = this.#conversation.head;
    if (head?.role === "user" && head.metadata.kind === "task") {
      if (head.content === task && JSON.stringify(head.images ?? []) === JSON.stringify(images)) return;
      const message = this.#conversation.attach(
        head.parentId,
        "user",
        task,
        { kind: "task", context },
        images,
      );
      emit({ type: "message", message });
      return;
    }
    this.#append(emit, "user", task, { kind: "task", context }, images);
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

  /**
   * Runs a step's actions from index `from`, appending an observation after each. Stops at the first that
   * pauses: that one is recorded as the pending step (on the conversation's head) and its requests emitted.
   */
  async #runActions(
    runtime: AgentRuntime,
    actions: StepAction[],
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
      const outcome = await runAction(runtime, action, at.step, at.emit, {
        execute:
          this.#signal === undefined
            ? this.#options.execute
            : { ...this.#options.execute, signal: this.#signal },
        observation: this.#options.observation,
        cutOffAt: at.cutOffAt,
      });
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
        pendingSteps.record(this.#conversation, pending, at.emit);
        return { failed, pending: pending.requests };
      }
      this.#observe(at.emit, outcome.observation, action.toolCall?.id, outcome.metadata, outcome.images);
      if (!outcome.ok) failed = true;
      // Each completed action is stored before the next runs: a run taken over mid-step runs none of them again.
      if (index < actions.length - 1) await this.#persist(runtime);
    }
    return { failed };
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
    const pending = pendingSteps.of(this.#conversation)!;
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
      execution = await runtime.resume(pending.continuation, answers, {
        ...(Object.keys(resumeLimits).length === 0 ? {} : { limits: resumeLimits }),
        ...(this.#signal === undefined ? {} : { signal: this.#signal }),
      });
    } catch (error) {
      if (MossError.is(error) && error.code === "continuation-invalid") {
        this.#closePending(emit, runtime, `could not be resumed (${error.message})`);
        await this.#persist(runtime);
      }
      throw error;
    }
    const observation = renderObservation(execution, this.#options.observation);
    emit({ type: "execution", step: pending.step, execution, observation });
    if (execution.pending !== undefined) {
      pendingSteps.record(
        this.#conversation,
        { ...pending, continuation: execution.pending.continuation, requests: execution.pending.requests },
        emit,
      );
      return { failed: pending.failedBefore, pending: execution.pending.requests };
    }
    pendingSteps.clear(this.#conversation);
    this.#observe(
      emit,
      observation,
      pending.toolCallId,
      {
        kind: "observation",
        ok: execution.ok,
        code: pending.code,
        resumed: true,
        ...(execution.error === undefined ? {} : { errorKind: execution.error.kind }),
        context: execution.context,
      },
      execution.images,
    );
    const assistant = this.#conversation.get(pending.assistantId);
    const actions = stepActions({
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

  /** Closes a paused step that will not resume (see {@link pendingSteps}.close). */
  #closePending(emit: (event: AgentEvent) => void, runtime: AgentRuntime, why: string): void {
    if (pendingSteps.of(this.#conversation) === undefined) return;
    pendingSteps.close(this.#conversation, why, runtime.dumpContext(), emit, (role, content, metadata) =>
      this.#append(emit, role, content, metadata),
    );
  }

  /** Appends an observation: a tool message answering `toolCallId`, or a user message when the code came as text. */
  #observe(
    emit: (event: AgentEvent) => void,
    observation: string,
    toolCallId: string | undefined,
    metadata: Record<string, unknown>,
    images?: ImageContent[],
  ): void {
    if (toolCallId !== undefined)
      this.#append(emit, "tool", observation, { ...metadata, toolCallId }, images);
    else this.#append(emit, "user", observation, metadata, images);
  }

  #append(
    emit: (event: AgentEvent) => void,
    role: ConversationMessage["role"],
    content: string,
    metadata: Record<string, unknown>,
    images?: ImageContent[],
  ): ConversationMessage {
    const message = this.#conversation.append(role, content, metadata, images);
    emit({ type: "message", message });
    return message;
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
    // The context is dumped only for a session that keeps it.
    const keeps = this.#options.sessionId !== undefined && this.#options.store !== undefined;
    await persistSession(this.#options, this.#conversation, keeps ? runtime.dumpContext() : undefined);
  }

  async #saveConversation(): Promise<void> {
    await persistSession(this.#options, this.#conversation);
  }
}

/** How a run starts from `run()`'s task: its text and its images in their stored form (checked before anything runs). */
function taskStart(task: string | AgentTask): LoopStart {
  if (typeof task === "string") return { kind: "task", task, images: [] };
  if (task === null || typeof task !== "object" || typeof task.task !== "string") {
    throw new MossError("invalid-argument", "run() needs a task: a string, or { task: string, images? }.");
  }
  const images = (task.images ?? []).map((image, index) => toImageContent(image, `images[${index}]`));
  return { kind: "task", task: task.task, images };
}
