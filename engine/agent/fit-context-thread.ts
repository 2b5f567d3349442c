import { Worker } from "node:worker_threads";
import { MossError, type MossErrorCode } from "../errors.ts";
import type { ChatMessage } from "../model/index.ts";
import { runnableEntryAsync } from "../runnable-entry.ts";
import type { ContextTrim, WindowEntry } from "./context-window.ts";

/** What the token-counting thread is asked: fit these messages to a budget. */
export interface FitContextRequest {
  id: number;
  system: ChatMessage;
  entries: WindowEntry[];
  budgetTokens: number;
}

/** A message from the token-counting thread. */
export type FitContextReply =
  | { kind: "ready" }
  | { kind: "fitted"; id: number; messages: ChatMessage[]; trim: ContextTrim | undefined; tokens: number }
  | { kind: "failed"; id: number; code?: MossErrorCode; message: string; details?: Record<string, unknown> };

/** What {@link fitContextOffThread} answers: `fitContext`'s result and the tokens of the messages sent. */
export interface FittedContext {
  messages: ChatMessage[];
  trim: ContextTrim | undefined;
  tokens: number;
}

interface CountingThread {
  worker: Worker;
  ready: Promise<void>;
  waiting: Map<number, { resolve: (value: FittedContext) => void; reject: (error: Error) => void }>;
}

let thread: CountingThread | undefined;
let nextId = 1;

/**
 * Starts the thread that counts tokens and builds its tokenizer (a second or more of CPU, there), ahead of the first
 * count, which otherwise starts it. Later calls answer at once.
 */
export async function startTokenCounter(): Promise<void> {
  await counter().ready;
}

/**
 * `fitContext` run on a worker thread of its own (one per process, shared by every run): counting tokens is CPU
 * work proportional to the text (seconds for a megabyte of unusual text), and the thread that serves HTTP and
 * drives every other run must not wait for it. Errors come back as the `MossError` `fitContext` threw.
 */
export async function fitContextOffThread(
  system: ChatMessage,
  entries: WindowEntry[],
  budgetTokens: number,
): Promise<FittedContext> {
  const current = counter();
  await current.ready;
  const id = nextId++;
  return new Promise<FittedContext>((resolve, reject) => {
    current.waiting.set(id, { resolve, reject });
    current.worker.ref();
    current.worker.postMessage({ id, system, entries, budgetTokens } satisfies FitContextRequest);
  });
}

function counter(): CountingThread {
  if (thread !== undefined) return thread;
  const waiting: CountingThread["waiting"] = new Map();
  let markReady: () => void = () => {};
  let failReady: (error: Error) => void = () => {};
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    failReady = reject;
  });
  const started = runnableEntryAsync(
    new URL(
      import.meta.url.endsWith(".ts") ? "./fit-context-worker.ts" : "./fit-context-worker.js",
      import.meta.url,
    ),
  ).then((entry) => new Worker(entry));
  const current: CountingThread = { worker: undefined as unknown as Worker, ready, waiting };
  thread = current;
  started.then(
    (worker) => {
      current.worker = worker;
      worker.on("message", (reply: FitContextReply) => {
        if (reply.kind === "ready") {
          // An idle thread does not keep the process alive.
          worker.unref();
          markReady();
          return;
        }
        const pending = waiting.get(reply.id);
        waiting.delete(reply.id);
        if (waiting.size === 0) worker.unref();
        if (reply.kind === "fitted") {
          pending?.resolve({ messages: reply.messages, trim: reply.trim, tokens: reply.tokens });
        } else if (reply.code !== undefined) {
          pending?.reject(new MossError(reply.code, reply.message, reply.details ?? {}));
        } else pending?.reject(new Error(reply.message));
      });
      const fail = (error: Error) => {
        if (thread === current) thread = undefined;
        failReady(error);
        for (const pending of waiting.values()) pending.reject(error);
        waiting.clear();
      };
      worker.on("error", fail);
      worker.on("exit", (code) => fail(new Error(`the token-counting thread stopped (exit code ${code})`)));
    },
    (error: Error) => {
      if (thread === current) thread = undefined;
      failReady(error);
    },
  );
  // A start that fails is reported to whoever awaits it; nobody awaiting is no unhandled rejection.
  ready.catch(() => {});
  return current;
}
