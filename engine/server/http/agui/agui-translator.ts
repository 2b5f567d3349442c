// AG-UI's view of a server run: its stored events as `@ag-ui/core` events (text, tool calls, results, interrupts),
// the same ones each time the same events are read, so a stream resumes where it was cut.
import { type BaseEvent, EventType, type Interrupt, type RunAgentInput } from "@ag-ui/core";
import type { ServerStore, StoredEvent } from "../../store/index.ts";

/** Run statuses after which the run's stream ends. */
const SETTLED = new Set(["completed", "failed", "cancelled", "pending"]);

/** One AG-UI event with its SSE id: `<server run>:<first event after>:<thread event>:<index>`, so a stream resumes. */
export interface Emitted {
  event: BaseEvent;
  cursor: [number, number];
}

/** Turns one server run's stored events into AG-UI events, the same ones each time it reads the same events. */
export class AguiTranslator {
  finished = false;
  readonly #input: RunAgentInput;
  readonly #serverRunId: string;
  #textId: string | undefined;
  #toolCallId: string | undefined;
  #heldResult: Record<string, unknown> | undefined;
  #end: Record<string, any> | undefined;
  #errors: string[] = [];
  /** The stable code of the run's failure (`model-unavailable`), from its `error` event. */
  #errorCode: string | undefined;
  /** The engine's description of each request of the run (its request event's `description`), by request id. */
  readonly #descriptions = new Map<string, string>();

  constructor(input: RunAgentInput, serverRunId: string, pausedCall: string | undefined) {
    this.#input = input;
    this.#serverRunId = serverRunId;
    this.#toolCallId = pausedCall;
  }

  started(after: number): Emitted {
    return {
      event: {
        type: EventType.RUN_STARTED,
        threadId: this.#input.threadId,
        runId: this.#input.runId,
        metadata: { mossRunId: this.#serverRunId },
      } as BaseEvent,
      cursor: [after, 0],
    };
  }

  translate(stored: StoredEvent): Emitted[] {
    if (stored.runId !== this.#serverRunId) return [];
    const data = stored.data as Record<string, any>;
    const out: BaseEvent[] = [];
    const push = (event: Record<string, unknown>) => out.push(event as BaseEvent);
    const endText = () => {
      if (this.#textId !== undefined) push({ type: EventType.TEXT_MESSAGE_END, messageId: this.#textId });
      this.#textId = undefined;
    };
    switch (stored.type) {
      case "text-delta":
        if (typeof data.delta !== "string" || data.delta === "") break;
        if (this.#textId === undefined) {
          this.#textId = `moss-text-${stored.id}`;
          push({ type: EventType.TEXT_MESSAGE_START, messageId: this.#textId, role: "assistant" });
        }
        push({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: this.#textId, delta: data.delta });
        break;
      case "message": {
        const answered = data.message?.metadata?.toolCallId;
        if (typeof answered === "string") this.#toolCallId ??= answered;
        if (this.#heldResult !== undefined && typeof answered === "string") {
          push({ ...this.#heldResult, toolCallId: answered });
          this.#heldResult = undefined;
        }
        if (data.message?.role !== "assistant") break;
        const content = String(data.message.content ?? "");
        if (this.#textId === undefined && content !== "") {
          const messageId = `moss-text-${stored.id}`;
          push({ type: EventType.TEXT_MESSAGE_START, messageId, role: "assistant" });
          push({ type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta: content });
          push({ type: EventType.TEXT_MESSAGE_END, messageId });
        }
        endText();
        break;
      }
      case "code":
        endText();
        this.#toolCallId = typeof data.toolCallId === "string" ? data.toolCallId : `moss-code-${stored.id}`;
        push({ type: EventType.TOOL_CALL_START, toolCallId: this.#toolCallId, toolCallName: "moss" });
        push({
          type: EventType.TOOL_CALL_ARGS,
          toolCallId: this.#toolCallId,
          delta: JSON.stringify({ code: data.code }),
        });
        push({ type: EventType.TOOL_CALL_END, toolCallId: this.#toolCallId });
        break;
      case "execution": {
        endText();
        // A call that waits for a person has no result yet: AG-UI sends it in the run that resumes, against the
        // same toolCallId the interrupt names.
        if (data.execution?.pending !== undefined) break;
        const result = {
          type: EventType.TOOL_CALL_RESULT,
          messageId: `moss-result-${stored.id}`,
          role: "tool",
          content: String(data.observation ?? ""),
        };
        // A resumed run executes again without a new tool call: its result names the call once the
        // observation message says which one it answers.
        if (this.#toolCallId === undefined) this.#heldResult = result;
        else push({ ...result, toolCallId: this.#toolCallId });
        break;
      }
      case "approval-request":
      case "clarification-request":
        if (typeof data.description === "string")
          this.#descriptions.set(String(data.request?.id), data.description);
        break;
      case "error":
        this.#errors.push(String(data.message));
        if (typeof data.error?.code === "string") this.#errorCode = data.error.code;
        break;
      case "run-end":
        endText();
        this.#end = data;
        break;
      case "run-status": {
        const status = String(data.status);
        if (!SETTLED.has(status)) break;
        endText();
        this.finished = true;
        const base = { threadId: this.#input.threadId, runId: this.#input.runId };
        if (status === "pending") {
          const pending: any[] = this.#end?.pending ?? [];
          push({
            type: EventType.RUN_FINISHED,
            ...base,
            outcome: {
              type: "interrupt",
              interrupts: pending.map((request) =>
                interruptOf(request, this.#toolCallId, this.#descriptions.get(String(request.id))),
              ),
            },
          });
        } else if (status === "cancelled") {
          push({ type: EventType.RUN_FINISHED, ...base, outcome: { type: "cancelled" } });
        } else if (status === "completed" && this.#end?.stopReason === "answer") {
          push({
            type: EventType.RUN_FINISHED,
            ...base,
            ...(typeof this.#end.answer === "string" ? { result: this.#end.answer } : {}),
            outcome: { type: "success" },
          });
        } else {
          const reason = this.#errors.at(-1) ?? this.#end?.reason ?? data.run?.error ?? `the run ${status}`;
          push({
            type: EventType.RUN_ERROR,
            message: String(reason),
            code: String(this.#errorCode ?? this.#end?.stopReason ?? status),
          });
        }
        break;
      }
    }
    return out.map((event, index) => ({ event, cursor: [stored.id, index] }));
  }
}

/**
 * An approval as a `tool_call` interrupt naming the inner call (`confirmation` when the code's tool call is not
 * known); `moss.ask` as `input_required` with its choices: AG-UI's core reasons, spelled as the protocol spells them.
 */
function interruptOf(
  request: Record<string, any>,
  toolCallId: string | undefined,
  description: string | undefined,
): Interrupt {
  const site = toolCallId === undefined ? {} : { toolCallId };
  if (request.kind === "approval") {
    const call = request.service === undefined ? request.member : `${request.service}.${request.member}`;
    const args: unknown[] = request.args ?? [];
    return {
      id: String(request.id),
      reason: toolCallId === undefined ? "confirmation" : "tool_call",
      // The engine's words for the request (its one describer), else the call's name.
      message: description ?? call,
      ...site,
      responseSchema: {
        type: "object",
        properties: { approved: { type: "boolean" }, reason: { type: "string" } },
        required: ["approved"],
        additionalProperties: false,
      },
      metadata: {
        call,
        ...(request.service === undefined ? {} : { service: request.service }),
        member: request.member,
        args,
        ...(request.target === undefined ? {} : { target: request.target }),
        ...(request.parameters === undefined ? {} : { parameters: request.parameters }),
        ...(request.doc === undefined ? {} : { doc: request.doc }),
        ...(request.handles === undefined ? {} : { handles: request.handles }),
        ...(request.line === undefined ? {} : { line: request.line }),
      },
    };
  }
  const choices: string[] | undefined = Array.isArray(request.choices) ? request.choices : undefined;
  return {
    id: String(request.id),
    reason: "input_required",
    message: String(request.question),
    ...site,
    responseSchema: {
      type: "object",
      properties: { answer: { type: "string", ...(choices === undefined ? {} : { enum: choices }) } },
      required: ["answer"],
      additionalProperties: false,
    },
    metadata: { question: request.question, ...(choices === undefined ? {} : { choices }) },
  };
}

/** The tool call of the code `runId` paused in: the last `code` event of the run before event `before`. */
export async function pausedToolCallId(
  store: ServerStore,
  tenant: string,
  threadId: string,
  runId: string,
  before: number,
): Promise<string | undefined> {
  // The pause follows its code within a few events (code, execution, request, run-end, run-status).
  const window = await store.eventsAfter(tenant, threadId, Math.max(0, before - 64), 64);
  for (const event of window.reverse()) {
    if (event.runId === runId && event.type === "code" && typeof event.data.toolCallId === "string")
      return event.data.toolCallId;
  }
  return undefined;
}
