import { parentPort } from "node:worker_threads";
import { MossError } from "../errors.ts";
import { fitContext, loadTokenizer, requestTokens } from "./context-window.ts";
import type { FitContextReply, FitContextRequest } from "./fit-context-thread.ts";

/*
 * The worker thread that counts tokens (see `fitContextOffThread`): building the tokenizer and counting a long text
 * take seconds of CPU, here rather than on the thread that serves HTTP.
 */

const port = parentPort!;
loadTokenizer();
port.postMessage({ kind: "ready" } satisfies FitContextReply);
port.on("message", (request: FitContextRequest) => {
  let reply: FitContextReply;
  try {
    const { messages, trim } = fitContext(request.system, request.entries, request.budgetTokens);
    reply = {
      kind: "fitted",
      id: request.id,
      messages,
      trim,
      tokens: trim?.tokensAfter ?? requestTokens(messages),
    };
  } catch (error) {
    reply = MossError.is(error)
      ? { kind: "failed", id: request.id, code: error.code, message: error.message, details: error.details }
      : { kind: "failed", id: request.id, message: (error as Error)?.message ?? String(error) };
  }
  port.postMessage(reply);
});
