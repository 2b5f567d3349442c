import { EventType } from "@ag-ui/core";
import type { Context, Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { ServerError } from "../../server-error.ts";
import type { EventHub, ServerStore } from "../../store/index.ts";
import { checkEventKnown } from "../event-cursor.ts";
import { followThreadEvents } from "../follow-thread-events.ts";
import { runImages } from "../run-images.ts";
import { answersOf, imagePartsOf, parseLastEventId, readInput, textOf } from "./agui-input.ts";
import { AguiTranslator, type Emitted, pausedToolCallId } from "./agui-translator.ts";

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
