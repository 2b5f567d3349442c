import { createParser } from "eventsource-parser";
import type {
  ErrorBody,
  Run,
  RunTrace,
  Thread,
  ThreadPrompt,
  ThreadSession,
  ThreadState,
} from "../engine/server/protocol.ts";
import {
  type AnsweredClarifications,
  answerOf,
  answersRequest,
  type ClarificationPayload,
} from "./answered-clarifications.ts";
import { type EventConfig, type ResolvedEventConfig, resolveEventConfig } from "./event-config.ts";
import { MessageTranslator, type ServerEvent } from "./message-translator.ts";
import type { ResponseStreamHandler } from "./response-stream-handler.ts";

/** Options of {@link RequestHandler}. */
export interface RequestHandlerOptions {
  /** The tenant's token (`Authorization: Bearer <token>`). */
  bearerToken: string;
  /** Where `moss serve` listens, e.g. `http://127.0.0.1:8787`. */
  serverUrl: string;
  /** The conversation's id, chosen by the app (created on the server on first use). */
  threadId: string;
  eventConfig?: EventConfig;
  /**
   * Reconnections in a row without a new event before the request reports the stream lost. Default 12: with the
   * default delays about 43 s, longer than a server restart.
   */
  maxReconnects?: number;
  /** Wait before the first reconnection, doubled each time up to 5 000. Default 250. */
  reconnectDelayMs?: number;
  /** The `fetch` to use (default the global one). */
  fetch?: typeof fetch;
}

/** One message of the thread as the app keeps it; the last one is the user's new message. */
export interface ThreadMessage {
  role: "user" | "assistant";
  content: string;
}

/** The server's answers to a cancel that mean the run no longer runs: ended already, or gone with its thread. */
const NOTHING_TO_CANCEL: ReadonlySet<string> = new Set(["run-finished", "thread-not-found"]);

/** Why a request could not be served: published as an `error` message, never thrown. */
class RequestFailure extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly status = 0,
  ) {
    super(message);
  }
}

/** Sends a thread's new user message (Fresh) or a clarification's answer (Clarification) and streams the run. */
export class RequestHandler {
  readonly #token: string;
  readonly #serverUrl: string;
  readonly #threadId: string;
  readonly #config: ResolvedEventConfig;
  readonly #fetch: typeof fetch;
  readonly #maxReconnects: number;
  readonly #reconnectDelayMs: number;
  #runId: string | undefined;
  #abort: AbortController | undefined;
  /** The run of each clarification this handler published, by request id: binds an answer recorded without one. */
  readonly #requestRuns = new Map<string, string>();

  constructor(options: RequestHandlerOptions) {
    for (const name of ["bearerToken", "serverUrl", "threadId"] as const) {
      if (typeof options?.[name] !== "string" || options[name] === "") {
        throw new TypeError(`new RequestHandler({ ${name} }) needs ${name} as a non-empty string.`);
      }
    }
    this.#token = options.bearerToken;
    this.#serverUrl = options.serverUrl.replace(/\/+$/, "");
    this.#threadId = options.threadId;
    this.#config = resolveEventConfig(options.eventConfig);
    this.#fetch = options.fetch ?? ((...args) => globalThis.fetch(...args));
    this.#maxReconnects = options.maxReconnects ?? 12;
    this.#reconnectDelayMs = options.reconnectDelayMs ?? 250;
  }

  /** The run the last request started or resumed, once the server accepted it. */
  get runId(): string | undefined {
    return this.#runId;
  }

  /**
   * Sends the last message of `body`: as the answer recorded under its text in `answeredClarifications`
   * (Clarification), else as a new user message (Fresh); publishes the run's messages to `responseStreamHandler`
   * and settles after `connectionFinished()`. Errors are published as `type: "error"`, never thrown.
   */
  async newRequest(
    body: ThreadMessage[],
    responseStreamHandler: ResponseStreamHandler,
    answeredClarifications?: AnsweredClarifications,
  ): Promise<void> {
    responseStreamHandler.begin();
    const abort = new AbortController();
    this.#abort = abort;
    try {
      const last = Array.isArray(body) ? body.at(-1) : undefined;
      if (
        last === undefined ||
        last.role !== "user" ||
        typeof last.content !== "string" ||
        last.content === ""
      ) {
        throw new RequestFailure(
          "newRequest(body) needs the thread's messages, the last one the user's new message ({ role: \"user\", content }).",
          "body-invalid",
        );
      }
      await this.#send("POST", "/v1/threads", { id: this.#threadId }, abort.signal);
      const state = await this.#send<ThreadState>(
        "GET",
        `/v1/threads/${encodeURIComponent(this.#threadId)}`,
        undefined,
        abort.signal,
      );
      const after = Number(state.lastEventId ?? 0);
      const payload = answeredClarifications?.get(last.content);
      const run =
        payload === undefined
          ? await this.#fresh(last.content, abort.signal)
          : await this.#clarification(payload, state, answeredClarifications!, after, abort.signal);
      this.#runId = String(run.id);
      responseStreamHandler.started();
      if (payload !== undefined && run.status === "pending") {
        // Other clarifications of the run still wait for an answer: they were published already.
        return;
      }
      await this.#stream(run.id, after, responseStreamHandler, abort.signal);
    } catch (error) {
      if (!abort.signal.aborted) {
        responseStreamHandler.publish({
          id: localErrorId(),
          type: "error",
          ...(error instanceof RequestFailure ? { code: error.code } : {}),
          message: error instanceof Error ? error.message : String(error),
        });
      }
    } finally {
      if (this.#abort === abort) this.#abort = undefined;
      responseStreamHandler.finished();
    }
  }

  /**
   * Cancels the run of the last request (from any instance); its stream ends with the cancellation. A run that
   * ended already (the server's 409 `run-finished`) or went with its deleted thread (404 `thread-not-found`: the
   * server deletes no thread while a run of it runs) is left as it is: there is nothing to cancel.
   */
  async cancel(): Promise<void> {
    if (this.#runId === undefined) return;
    try {
      await this.#send(
        "POST",
        `/v1/threads/${encodeURIComponent(this.#threadId)}/runs/${encodeURIComponent(this.#runId)}/cancel`,
        undefined,
      );
    } catch (error) {
      if (!(error instanceof RequestFailure && NOTHING_TO_CANCEL.has(error.code))) throw error;
    }
  }

  /**
   * Replaces the thread's metadata (`{ title }` renames it in the studio) and resolves the thread as stored. A refusal
   * is thrown as an Error with the server's `code` (`metadata-too-large`, `thread-not-found`, `metadata-invalid`).
   */
  async updateThread(update: { metadata: Record<string, unknown> }): Promise<Thread> {
    const response = await this.#send<{ thread: Thread }>(
      "PATCH",
      `/v1/threads/${encodeURIComponent(this.#threadId)}`,
      { metadata: update?.metadata },
    );
    return response.thread;
  }

  /**
   * The trace of a run of this thread (default: the last request's): the host calls of each execution of its code,
   * with their sizes and, unless the server keeps sizes only, their arguments, results and errors (bounded,
   * redacted). A page is bounded in bytes: pass its `next` as `after` for the rest. A refusal throws an Error with
   * the server's `code` (`thread-not-found`, `run-not-found`).
   */
  async getTrace(runId: string | undefined = this.#runId, after?: number): Promise<RunTrace> {
    if (typeof runId !== "string" || runId === "") {
      throw new RequestFailure(
        "getTrace(runId) needs a run: this handler has made no request yet.",
        "run-not-found",
      );
    }
    const query = after === undefined ? "" : `?after=${encodeURIComponent(String(after))}`;
    return this.#send<RunTrace>(
      "GET",
      `/v1/threads/${encodeURIComponent(this.#threadId)}/runs/${encodeURIComponent(runId)}/trace${query}`,
      undefined,
    );
  }

  /**
   * The data fields of `moss` in a thread now (default this handler's), each as readable JSON text, and when they were
   * stored: `GET /v1/threads/:threadId/session`. A refusal (`thread-not-found`, …) throws an Error with its `code`.
   */
  getSession(threadId: string = this.#threadId): Promise<ThreadSession> {
    return this.#send<ThreadSession>("GET", `${threadPath(threadId)}/session`, undefined);
  }

  /** The module prompt the model reads for a thread (default this handler's): `GET /v1/threads/:threadId/prompt`. */
  getPrompt(threadId: string = this.#threadId): Promise<ThreadPrompt> {
    return this.#send<ThreadPrompt>("GET", `${threadPath(threadId)}/prompt`, undefined);
  }

  /**
   * The bytes of image `index` of a message of a thread (default this handler's), typed with its stored media type:
   * `GET /v1/threads/:threadId/messages/:messageId/images/:index` (a message's id is in its `message` event).
   */
  async getImage(messageId: string, index: number, threadId: string = this.#threadId): Promise<Blob> {
    const response = await this.#request(
      "GET",
      `${threadPath(threadId)}/messages/${encodeURIComponent(messageId)}/images/${encodeURIComponent(String(index))}`,
      undefined,
    );
    return response.blob();
  }

  /** Stops reading the current request's stream at once (the run goes on on the server). */
  close(): void {
    this.#abort?.abort();
  }

  async #fresh(message: string, signal: AbortSignal): Promise<Run> {
    const response = await this.#send<{ run: Run }>(
      "POST",
      `/v1/threads/${encodeURIComponent(this.#threadId)}/runs`,
      { message },
      signal,
    );
    return response.run;
  }

  /** The request an answer was given for: its own `runId`, else the run of the clarification published with its id. */
  #bound(payload: ClarificationPayload): ClarificationPayload {
    const runId = payload.runId ?? this.#requestRuns.get(payload.requestId);
    return runId === undefined ? payload : { ...payload, runId };
  }

  async #clarification(
    given: ClarificationPayload,
    state: ThreadState,
    answered: AnsweredClarifications,
    lastEventId: number,
    signal: AbortSignal,
  ): Promise<Run> {
    const payload = this.#bound(given);
    const waitingRun = typeof state.runId === "string" ? state.runId : undefined;
    const pending: Array<{ id: string }> = state.status === "pending" ? (state.pending ?? []) : [];
    if (payload.runId !== undefined && payload.runId !== waitingRun) {
      // Given for a run that no longer waits: it answers nothing now, whatever the id of what waits.
      throw new RequestFailure(
        `The answer "${payload.requestId}" was given for run "${payload.runId}", which waits for no answer now${waitingRun === undefined ? "" : ` (run "${waitingRun}" does)`}; nothing was sent.`,
        "request-unknown",
        404,
      );
    }
    const answers: Record<string, unknown> = { [payload.requestId]: answerOf(payload) };
    // A run that waits on several requests resumes once all are answered: send every other answer recorded for
    // one of them (that run, that id), and none given for anything else.
    for (const [, recorded] of answered.entries()) {
      const other = this.#bound(recorded);
      if (answers[other.requestId] !== undefined || waitingRun === undefined) continue;
      if (pending.some((request) => answersRequest(other, { runId: waitingRun, id: request.id }))) {
        answers[other.requestId] = answerOf(other);
      }
    }
    // The same answers at the same point of the thread: a retried request, applied once.
    const key = `crewmaster:${this.#threadId}:${lastEventId}:${payload.runId ?? ""}:${Object.entries(answers)
      .map(([id, answer]) => `${id}=${JSON.stringify(answer)}`)
      .sort()
      .join("&")}`;
    const response = await this.#send<{ run: Run }>(
      "POST",
      `/v1/threads/${encodeURIComponent(this.#threadId)}/answers`,
      { answers, ...(payload.runId === undefined ? {} : { runId: payload.runId }) },
      signal,
      { "idempotency-key": await digest(key) },
    );
    return response.run;
  }

  /** Reads the thread's events after `after` until `runId` settles, reconnecting with Last-Event-ID when cut. */
  async #stream(
    runId: string,
    after: number,
    handler: ResponseStreamHandler,
    signal: AbortSignal,
  ): Promise<void> {
    const translator = new MessageTranslator(this.#config, runId);
    let cursor = after;
    let failures = 0;
    while (translator.settled === undefined) {
      const before = cursor;
      try {
        const response = await this.#fetch(
          `${this.#serverUrl}/v1/threads/${encodeURIComponent(this.#threadId)}/events`,
          {
            headers: { ...this.#headers(), accept: "text/event-stream", "last-event-id": String(cursor) },
            signal,
          },
        );
        if (!response.ok) throw await failureOf(response);
        const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
        const received: ServerEvent[] = [];
        const parser = createParser({
          onEvent(event) {
            if (event.id === undefined || event.event === undefined) return;
            // The server's protocol: `data:` is the event as the thread published it, of the type `event:` names.
            received.push({
              id: Number(event.id),
              type: event.event,
              data: JSON.parse(event.data),
            } as ServerEvent);
          },
        });
        try {
          while (translator.settled === undefined) {
            const { done, value } = await reader.read();
            if (done) break;
            parser.feed(value);
            for (const event of received.splice(0)) {
              if (event.id <= cursor) continue;
              cursor = event.id;
              for (const message of translator.translate(event)) {
                if (message.type === "clarification") this.#requestRuns.set(message.requestId, message.runId);
                handler.publish(message);
              }
              if (translator.settled !== undefined) break;
            }
          }
        } finally {
          await reader.cancel().catch(() => {});
        }
      } catch (error) {
        if (signal.aborted) throw error;
        // A refusal is final; a lost connection or a server error is retried from the last event received.
        if (error instanceof RequestFailure && error.status >= 400 && error.status < 500) throw error;
      }
      if (translator.settled !== undefined) return;
      failures = cursor > before ? 0 : failures + 1;
      if (failures > this.#maxReconnects) {
        throw new RequestFailure(
          `The event stream of thread "${this.#threadId}" was lost and ${this.#maxReconnects} reconnections got nothing new; the run goes on on the server.`,
          "stream-lost",
        );
      }
      await sleep(Math.min(5_000, this.#reconnectDelayMs * 2 ** Math.max(0, failures - 1)), signal);
    }
  }

  #headers(): Record<string, string> {
    return { authorization: `Bearer ${this.#token}` };
  }

  /** The server's JSON answer to a request, as the protocol shapes it (a refusal throws its `RequestFailure`). */
  async #send<Body = Record<string, unknown>>(
    method: string,
    path: string,
    body: unknown,
    signal?: AbortSignal,
    headers: Record<string, string> = {},
  ): Promise<Body> {
    return (await (await this.#request(method, path, body, signal, headers)).json()) as Body;
  }

  /** The server's answer to a request when it is a success (a refusal throws its `RequestFailure`). */
  async #request(
    method: string,
    path: string,
    body: unknown,
    signal?: AbortSignal,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    let response: Response;
    try {
      response = await this.#fetch(`${this.#serverUrl}${path}`, {
        method,
        headers: {
          ...this.#headers(),
          ...headers,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        ...(signal === undefined ? {} : { signal }),
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      throw new RequestFailure(
        `Cannot reach the server at ${this.#serverUrl}: ${(error as Error).message}.`,
        "server-unreachable",
      );
    }
    if (!response.ok) throw await failureOf(response);
    return response;
  }
}

/** The API path of a thread. */
function threadPath(threadId: string): string {
  return `/v1/threads/${encodeURIComponent(threadId)}`;
}

/** The server's `{ error: { code, message } }` as a failure (or the status when the body is not that). */
async function failureOf(response: Response): Promise<RequestFailure> {
  const text = await response.text().catch(() => "");
  try {
    const { error } = JSON.parse(text) as ErrorBody;
    if (typeof error?.message === "string") {
      return new RequestFailure(error.message, String(error.code), response.status);
    }
  } catch {}
  return new RequestFailure(
    `The server answered ${response.status}: ${text.slice(0, 200)}`,
    `http-${response.status}`,
    response.status,
  );
}

/** A short stable key for the answers, so a retried request is not applied twice. */
async function digest(text: string): Promise<string> {
  const bytes = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(bytes)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

let localErrors = 0;

/**
 * The id of an error the client publishes itself (no thread event carries it): unique in the thread, also for two
 * refusals in the same millisecond or from two handlers (`crypto.randomUUID` is missing on plain-http pages).
 */
function localErrorId(): string {
  localErrors += 1;
  return `error-${Date.now().toString(36)}-${localErrors.toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}
