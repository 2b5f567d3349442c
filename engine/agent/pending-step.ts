import { describeRequest } from "../format-value.ts";
import type { Conversation, ConversationMessage, ToolCall } from "../model/index.ts";
import { continuationCode } from "../runtime/index.ts";
import type { MossContext, PendingRequest } from "../types.ts";
import type { AgentEvent } from "./agent-types.ts";
import { notResumedObservation } from "./observation.ts";
import { stepActions } from "./step-actions.ts";

/**
 * A paused step, kept in the metadata (`pending`) of the conversation's head while it waits, so it is saved with
 * the session and a new agent with the same session resumes it.
 */
export interface PendingStep {
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

/** Appends a message to the conversation and emits it; how every step adds to the conversation. */
export type AppendMessage = (
  role: ConversationMessage["role"],
  content: string,
  metadata: Record<string, unknown>,
) => ConversationMessage;

/**
 * The pause/resume bookkeeping of a conversation: which step waits (on the head's metadata), recording a pause,
 * and closing a paused step that will not resume.
 */
export const pendingSteps = {
  /** The paused step the conversation's head waits on, if any. */
  of(conversation: Conversation): PendingStep | undefined {
    const pending = conversation.head?.metadata.pending as PendingStep | undefined;
    return pending !== undefined && typeof pending.continuation === "string" ? pending : undefined;
  },

  /** Keeps `pending` on the conversation's head (saved with the session) and emits one event per request. */
  record(conversation: Conversation, pending: PendingStep, emit: (event: AgentEvent) => void): void {
    conversation.update(conversation.head!.id, { pending });
    for (const request of pending.requests) {
      const description = describeRequest(request);
      if (request.kind === "approval")
        emit({ type: "approval-request", step: pending.step, request, description });
      else emit({ type: "clarification-request", step: pending.step, request, description });
    }
  },

  /**
   * Makes a checkpoint of the head's running code the paused step of the conversation (it waits for no answer),
   * when the head is a model answer of one action that is not paused already. False otherwise: the observations of
   * a step's earlier actions would be missing, or the checkpoint is not a continuation.
   */
  fromCheckpoint(conversation: Conversation, checkpoint: string): boolean {
    const head = conversation.head;
    const code = continuationCode(checkpoint);
    if (head === undefined || code === undefined || head.metadata.pending !== undefined) return false;
    // The step: its assistant message, then one observation per completed action.
    const thread = conversation.thread();
    let at = thread.length - 1;
    while (at >= 0 && thread[at]!.role !== "assistant") at--;
    const assistant = thread[at];
    const observations = thread.slice(at + 1);
    if (assistant === undefined || observations.some((entry) => entry.metadata.kind !== "observation"))
      return false;
    const toolCalls = (assistant.metadata.toolCalls as ToolCall[] | undefined) ?? [];
    const actionIndex = observations.length;
    const action = stepActions({ content: assistant.content, toolCalls })[actionIndex];
    // The checkpoint must be the running action's (one of the action before it may not have been cleared yet).
    if (action === undefined || action.extracted.kind !== "code" || action.extracted.code !== code)
      return false;
    const pending: PendingStep = {
      continuation: checkpoint,
      requests: [],
      assistantId: assistant.id,
      actionIndex,
      step: typeof assistant.metadata.step === "number" ? assistant.metadata.step : 1,
      code,
      ...(action.toolCall === undefined ? {} : { toolCallId: action.toolCall.id }),
      failedBefore: observations.some((entry) => entry.metadata.ok === false),
    };
    conversation.update(head.id, { pending });
    return true;
  },

  /** Marks the head as no longer waiting (the paused step resumed or was closed). */
  clear(conversation: Conversation): void {
    conversation.update(conversation.head!.id, { pending: undefined });
  },

  /**
   * Closes a paused step that will not resume: the paused code and the step's tool calls after it get an
   * observation saying so (every tool call keeps its answer), and the head no longer waits.
   */
  close(
    conversation: Conversation,
    why: string,
    context: MossContext,
    emit: (event: AgentEvent) => void,
    append: AppendMessage,
  ): void {
    const pending = pendingSteps.of(conversation);
    if (pending === undefined) return;
    pendingSteps.clear(conversation);
    const message = `The paused run of step ${pending.step} ${why}; nothing it did persisted.`;
    emit({ type: "notice", step: pending.step, kind: "pending-abandoned", message });
    const observe = (content: string, toolCallId: string | undefined, metadata: Record<string, unknown>) =>
      toolCallId !== undefined
        ? append("tool", content, { ...metadata, toolCallId })
        : append("user", content, metadata);
    observe(notResumedObservation(why), pending.toolCallId, {
      kind: "observation",
      ok: false,
      code: pending.code,
      errorKind: "not-resumed",
      context,
    });
    const assistant = conversation.get(pending.assistantId);
    const toolCalls = (assistant.metadata.toolCalls as ToolCall[] | undefined) ?? [];
    const later = toolCalls.slice(
      toolCalls.findIndex((call) => call.id === pending.toolCallId) + 1 || toolCalls.length,
    );
    for (const call of later) {
      observe(notResumedObservation("so this later call did not run"), call.id, {
        kind: "observation",
        ok: false,
        errorKind: "not-resumed",
        context,
      });
    }
  },
};
