import { type BaseEvent, EventType, type Interrupt, type RunAgentInput } from "@ag-ui/core";
import type { Context, Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { ServerError } from "../../server-error.ts";
import type { EventHub, ServerStore, StoredEvent } from "../../store/index.ts";
import { checkEventKnown, eventId } from "../event-cursor.ts";
import { followThreadEvents } from "../follow-thread-events.ts";
import { readJson } from "../read-json-body.ts";
import { runImages } from "../run-images.ts";

/** What the AG-UI route needs of the server app. */
export interface AguiRouteOptions {
  store: ServerStore;
  events: EventHub;
  maxActiveRuns(tenant: string): number;
  maxBodyBytes(tenant: string): number;
  heartbeatMs: number;
  /** Registers a stream's close function while it is open (a draining server closes them). */
  streams: Set<() => void>;
}

/** One AG-UI event with its SSE id: `<server run>:<first event after>:<thread event>:<index>`, so a stream resumes. */
interface Emitted {
  event: BaseEvent;
  cursor: [number, number];
}

const THREAD_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const SETTLED = new Set(["completed", "failed", "cancelled", "pending"]);
/** The RUN_ERROR code of a new message on a thread whose run waits for answers to its interrupts. */
const INTERRUPTS_PENDING = "interrupts-pending";
/**
 * Refusals of resume entries answered in the stream as RUN_ERROR (the store's codes): no run waits for them or an
 * id names no open interrupt, an answer of the wrong shape, the same runId reused with other answers.
 */
const RESUME_REFUSALS = new Set(["request-unknown", "answer-invalid", "idempotency-key-reused"]);

/** A run that cannot start, answered as AG-UI wants it: a stream with one RUN_ERROR event, not an HTTP error. */
function runError(c: Context, message: string, code: string): Response {
  return streamSSE(c, async (stream) => {
    const event = { type: EventType.RUN_ERROR, message, code };
    await stream.writeSSE({ event: event.type, data: JSON.stringify(event) });
  });
}

/**
 * `POST /v1/agui`: an AG-UI `RunAgentInput` starts a run with its last user message, or resumes a paused run with
 * `resume` entries; the answer is an SSE stream of `@ag-ui/core` events. Approvals and `moss.ask` end the run with
 * an interrupt outcome. A client that lost the stream posts the same input again with `Last-Event-ID`.
 */
export function registerAguiRoute(
  app: Hono<{ Variables: { tenant: string } }>,
  options: AguiRouteOptions,
): void {
  const { store, events } = options;
  app.post("/v1/agui", async (c) => {
    const tenant = c.get("tenant");
    const input = await readInput(c, options.maxBodyBytes(tenant));
    const resumeFrom = parseLastEventId(c.req.header("last-event-id"));
    let serverRunId: string;
    let after: number;
    let skipThrough: [number, number] = [-1, -1];
    if (resumeFrom !== undefined) {
      const run = await store.requireRun(tenant, input.threadId, resumeFrom.runId);
      // As the native stream: an id past the thread's last event names nothing a stream could wait for.
      const last = (await store.lastEventId(tenant, input.threadId)) ?? 0;
      checkEventKnown(Math.max(resumeFrom.after, resumeFrom.cursor[0]), last, input.threadId);
      serverRunId = run.id;
      after = resumeFrom.after;
      skipThrough = resumeFrom.cursor;
    } else {
      await store.createThread(tenant, input.threadId);
      after = (await store.lastEventId(tenant, input.threadId)) ?? 0;
      if (input.resume !== undefined && input.resume.length > 0) {
        let response: Awaited<ReturnType<ServerStore["answer"]>>;
        try {
          response = await store.answer(
            tenant,
            input.threadId,
            answersOf(input.resume),
            `agui:${input.threadId}:${input.runId}`,
          );
        } catch (error) {
          // A resume entry the thread cannot take is the run's error, in the stream, where a stock client looks.
          if (!(error instanceof ServerError) || !RESUME_REFUSALS.has(error.code)) throw error;
          return runError(c, `The resume entries were refused: ${error.message}`, error.code);
        }
        serverRunId = String((response.body.run as { id: string }).id);
      } else {
        const last = input.messages.at(-1);
        const content = last?.role === "user" ? textOf(last.content) : "";
        if (content.trim() === "") {
          throw new ServerError(
            400,
            "agui-input-invalid",
            "RunAgentInput.messages must end with the user's new message (role \"user\", non-empty text), or carry resume entries that answer the run's interrupts.",
          );
        }
        const images = runImages(
          imagePartsOf(last!.content),
          `messages[${input.messages.length - 1}].content images`,
        );
        let run: Awaited<ReturnType<ServerStore["createRun"]>>;
        try {
          run = await store.createRun(tenant, input.threadId, content, {
            maxActiveRuns: options.maxActiveRuns(tenant),
            ...(images.length === 0 ? {} : { images }),
          });
        } catch (error) {
          if (!(error instanceof ServerError) || error.code !== "thread-busy") throw error;
          // AG-UI clients look for a run's refusal in the stream, not in the HTTP status (the native API's 409).
          const state = await store.threadState(tenant, input.threadId);
          if (state?.status !== "pending") return runError(c, error.message, error.code);
          // AG-UI: a thread with open interrupts continues only by a run whose `resume` answers them.
          const open = state.pending.map((request) => `"${String(request.id)}"`).join(", ");
          return runError(
            c,
            `Thread "${input.threadId}" has open interrupts (${open}): answer or cancel them with "resume" entries before sending a new message.`,
            INTERRUPTS_PENDING,
          );
        }
        serverRunId = run.id;
      }
    }
    // A resumed run runs the paused code again without a new tool call: its results and interrupts name that call.
    const pausedCall =
      input.resume !== undefined && input.resume.length > 0
        ? await pausedToolCallId(store, tenant, input.threadId, serverRunId, after)
        : undefined;
    return streamSSE(c, async (stream) => {
      const translator = new AguiTranslator(input, serverRunId, pausedCall);
      const send = async ({ event, cursor }: Emitted) => {
        if (cursor[0] < skipThrough[0] || (cursor[0] === skipThrough[0] && cursor[1] <= skipThrough[1]))
          return;
        await stream.writeSSE({
          id: `${serverRunId}:${after}:${cursor[0]}:${cursor[1]}`,
          event: event.type,
          data: JSON.stringify(event),
        });
      };
      await send(translator.started(after));
      await followThreadEvents(
        stream,
        {
          store,
          events,
          tenant,
          threadId: input.threadId,
          after,
          streams: options.streams,
          heartbeatMs: options.heartbeatMs,
        },
        async (stored) => {
          for (const emitted of translator.translate(stored)) await send(emitted);
          return translator.finished;
        },
      );
    });
  });
}

/** Turns one server run's stored events into AG-UI events, the same ones each time it reads the same events. */
class AguiTranslator {
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
async function pausedToolCallId(
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

/** The native answers of AG-UI resume entries: a cancelled interrupt is a denial (or an empty answer). */
function answersOf(resume: NonNullable<RunAgentInput["resume"]>): Record<string, unknown> {
  const answers: Record<string, unknown> = {};
  for (const entry of resume) {
    const payload = entry.payload as Record<string, unknown> | undefined;
    if (entry.status === "cancelled") {
      answers[entry.interruptId] = { approved: false, reason: "cancelled by the user" };
    } else if (payload !== undefined && typeof payload === "object" && payload !== null) {
      answers[entry.interruptId] = payload;
    } else {
      throw new ServerError(
        400,
        "answer-invalid",
        `resume entry "${entry.interruptId}" needs a payload: {"approved": boolean, "reason"?} or {"answer": string}.`,
      );
    }
  }
  return answers;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (part?.type === "text" && typeof part.text === "string" ? part.text : ""))
      .join("");
  }
  return "";
}

/**
 * The image parts of a user message's content as the agent's image inputs: AG-UI's `{ type: "image", source }` with
 * a `data` source (base64 `value` and `mimeType`) or a `url` source; another source is left for the image check to
 * refuse by name.
 */
function imagePartsOf(content: unknown): unknown[] {
  if (!Array.isArray(content)) return [];
  return content
    .filter((part) => part?.type === "image")
    .map((part) => {
      const source = part.source ?? {};
      if (source.type === "data") return { mediaType: source.mimeType, data: source.value };
      if (source.type === "url") return { mediaType: source.mimeType, url: source.value };
      return { mediaType: source.mimeType, source: source.type };
    });
}

/** Reads and checks the fields of a `RunAgentInput` this endpoint uses; a bad one is a 400 naming the field. */
async function readInput(c: Context, maxBytes: number): Promise<RunAgentInput> {
  const value: any = await readJson(c, maxBytes, false);
  const invalid = (message: string) =>
    new ServerError(400, "agui-input-invalid", `RunAgentInput: ${message}`);
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw invalid("the body must be an object.");
  if (typeof value.threadId !== "string" || !THREAD_ID.test(value.threadId)) {
    throw invalid(
      '"threadId" must be 1 to 128 letters, digits, _ . : or - (starting with a letter or digit).',
    );
  }
  if (typeof value.runId !== "string" || value.runId === "")
    throw invalid('"runId" must be a non-empty string.');
  if (!Array.isArray(value.messages)) throw invalid('"messages" must be an array.');
  if (value.resume !== undefined) {
    if (!Array.isArray(value.resume)) throw invalid('"resume" must be an array of resume entries.');
    for (const entry of value.resume) {
      if (typeof entry?.interruptId !== "string" || !["resolved", "cancelled"].includes(entry.status)) {
        throw invalid('each "resume" entry needs "interruptId" and "status" ("resolved" or "cancelled").');
      }
    }
  }
  return value as RunAgentInput;
}

function parseLastEventId(
  header: string | undefined,
): { runId: string; after: number; cursor: [number, number] } | undefined {
  if (header === undefined || header.trim() === "") return undefined;
  const match = /^(.+):([^:]*):([^:]*):([^:]*)$/.exec(header.trim());
  if (match === null) {
    throw new ServerError(
      400,
      "event-id-invalid",
      `Last-Event-ID must be an id this endpoint sent (<run>:<n>:<n>:<n>), got "${header.slice(0, 200)}".`,
    );
  }
  // Each number as the native API reads an event id (one reader): past the safe integers it is refused, not rounded.
  const part = (text: string) => eventId(text, "Last-Event-ID");
  return { runId: match[1]!, after: part(match[2]!), cursor: [part(match[3]!), part(match[4]!)] };
}
