import type { PublishedExecution, StreamedEvent } from "../engine/server/protocol.ts";
import { FormatType, MomentType, type ResolvedEventConfig, ScopeType } from "./event-config.ts";
import { APPROVAL_CHOICES, type PublishedMessage } from "./published-message.ts";

/** One event of the thread's stream as the server sent it (`id:`, `event:`, `data:`): the server's protocol. */
export type ServerEvent = StreamedEvent;

/** Run statuses after which a request has nothing more to wait for. */
const SETTLED = new Set(["completed", "failed", "cancelled", "pending"]);

/** Turns one run's server events into the protocol's messages, and says when the run settled. */
export class MessageTranslator {
  readonly #config: ResolvedEventConfig;
  readonly #runId: string;
  /** The text block being streamed: its id and what came so far. */
  #text: { id: string; eventId: number; content: string } | undefined;
  #errorPublished = false;
  settled: string | undefined;

  constructor(config: ResolvedEventConfig, runId: string) {
    this.#config = config;
    this.#runId = runId;
  }

  /** The messages `event` publishes (none for another run's events). */
  translate(event: ServerEvent): PublishedMessage[] {
    if (event.data.runId !== this.#runId) return [];
    const out: PublishedMessage[] = [];
    const emit = (message: PublishedMessage) => {
      const answerOnly = this.#config.scope === ScopeType.Answer;
      if (answerOnly && !["answer", "clarification", "error"].includes(message.type)) return;
      out.push(this.#config.format === FormatType.Verbose ? { ...message, runId: this.#runId } : message);
    };
    switch (event.type) {
      case "text-delta": {
        const delta = String(event.data.delta ?? "");
        if (this.#text === undefined) {
          this.#text = { id: String(event.id), eventId: event.id, content: "" };
          if (this.#config.moments.has(MomentType.Start)) {
            emit(this.#verbose({ id: this.#text.id, type: "text", content: "", moment: "start" }, event));
          }
        }
        this.#text.content += delta;
        if (this.#config.moments.has(MomentType.Delta)) {
          emit(this.#verbose({ id: this.#text.id, type: "text", content: delta, moment: "delta" }, event));
        }
        break;
      }
      case "message": {
        const { message } = event.data;
        if (message?.role !== "assistant") break;
        const content = String(message.content ?? "");
        const id = this.#text?.id ?? String(event.id);
        const started = this.#text !== undefined;
        this.#text = undefined;
        if (content.trim() === "" && !started) break;
        if (!started && this.#config.moments.has(MomentType.Start)) {
          emit(this.#verbose({ id, type: "text", content: "", moment: "start" }, event));
        }
        if (this.#config.moments.has(MomentType.End)) {
          emit(this.#verbose({ id, type: "text", content, moment: "end" }, event));
        }
        break;
      }
      case "code":
        emit(
          this.#verbose({ id: String(event.id), type: "code", code: String(event.data.code ?? "") }, event),
        );
        break;
      case "execution": {
        const { execution } = event.data;
        const error =
          execution?.ok === true
            ? undefined
            : execution?.error !== undefined
              ? errorText(execution.error)
              : execution?.pending !== undefined
                ? "The code paused, waiting for a person's answer."
                : "The code failed.";
        emit(
          this.#verbose(
            {
              id: String(event.id),
              type: "execution",
              ok: execution?.ok === true,
              stdout: String(execution?.stdout ?? ""),
              ...(error === undefined ? {} : { error }),
            },
            event,
          ),
        );
        break;
      }
      case "approval-request":
      case "clarification-request": {
        const { request, description } = event.data;
        if (request?.kind === "approval") {
          const name =
            request.service === undefined ? request.member : `${request.service}.${request.member}`;
          const args: unknown[] = Array.isArray(request.args) ? request.args : [];
          emit(
            this.#verbose(
              {
                id: String(event.id),
                type: "clarification",
                runId: this.#runId,
                requestId: String(request.id),
                kind: "approval",
                // The engine's words for the call (its one describer, stored with the event).
                question: String(description ?? name),
                choices: [...APPROVAL_CHOICES],
                ...(request.service === undefined ? {} : { service: String(request.service) }),
                member: String(request.member),
                args,
              },
              event,
            ),
          );
        } else {
          emit(
            this.#verbose(
              {
                id: String(event.id),
                type: "clarification",
                runId: this.#runId,
                requestId: String(request?.id),
                kind: "question",
                question: String(request?.question ?? ""),
                choices: Array.isArray(request?.choices) ? request.choices.map(String) : [],
              },
              event,
            ),
          );
        }
        break;
      }
      case "error": {
        const data = event.data;
        this.#errorPublished = true;
        emit(
          this.#verbose(
            {
              id: String(event.id),
              type: "error",
              // The server's stable code for the failure (`model-unavailable`, `server-error`), when it sent one.
              ...(typeof data.error?.code === "string" ? { code: data.error.code } : {}),
              message: String(data.message),
            },
            event,
          ),
        );
        break;
      }
      case "run-end": {
        const data = event.data;
        const answer = typeof data.answer === "string" ? data.answer : undefined;
        if (data.stopReason === "answer" && answer !== undefined) {
          emit(this.#verbose({ id: String(event.id), type: "answer", content: answer }, event));
        } else if (data.stopReason !== "pending" && !this.#errorPublished) {
          this.#errorPublished = true;
          emit(
            this.#verbose(
              {
                id: String(event.id),
                type: "error",
                code: String(data.stopReason),
                message: `The run stopped: ${String(data.reason ?? data.stopReason)}.`,
              },
              event,
            ),
          );
        }
        break;
      }
      case "run-status": {
        const data = event.data;
        const status = String(data.status);
        if (!SETTLED.has(status)) break;
        if ((status === "failed" || status === "cancelled") && !this.#errorPublished) {
          this.#errorPublished = true;
          const reason = data.run?.error === undefined ? "" : `: ${String(data.run.error)}`;
          emit({
            id: String(event.id),
            type: "error",
            code: status === "cancelled" ? "cancelled" : "run-failed",
            message: status === "cancelled" ? "The run was cancelled." : `The run failed${reason}.`,
          });
        }
        this.settled = status;
        break;
      }
    }
    return out;
  }

  #verbose<T extends PublishedMessage>(message: T, event: ServerEvent): T {
    if (this.#config.format !== FormatType.Verbose) return message;
    const data = event.data;
    const details: Record<string, unknown> = { eventId: event.id };
    if ("step" in data && typeof data.step === "number") details.step = data.step;
    if (event.type === "execution") {
      details.observation = event.data.observation;
      details.calls = event.data.execution?.calls;
      details.returns = event.data.execution?.returns;
    }
    if (event.type === "approval-request" || event.type === "clarification-request") {
      // A question has no `reason`: it reads as undefined, as an approval's absent one does.
      const request: { line?: unknown; code?: unknown; reason?: unknown } | undefined = event.data.request;
      details.line = request?.line;
      details.codeFrame = request?.code;
      details.reason = request?.reason;
    }
    if (event.type === "run-end") {
      details.stopReason = event.data.stopReason;
      details.usage = event.data.usage;
    }
    return { ...message, ...details };
  }
}

function errorText(error: PublishedExecution["error"] | string): string {
  if (typeof error === "string") return error;
  const name = typeof error?.name === "string" && error.name !== "" ? `${error.name}: ` : "";
  return `${name}${String(error?.message ?? "the code failed")}`;
}
