import { createRequire } from "node:module";
import { Tiktoken, type TiktokenBPE } from "js-tiktoken/lite";
import { MossError } from "../errors.ts";
import { truncateMiddle } from "../format-value.ts";
import type { ChatMessage } from "../model/index.ts";

/** The context size assumed when neither the options nor the model server give one. */
export { DEFAULT_CONTEXT_TOKENS } from "../stop-reasons.ts";

/** Tokens kept free besides the output (`max_tokens`): the counting tokenizer is not the model's own. */
export const CONTEXT_MARGIN_RATIO = 0.1;

/** Characters an old observation is cut to when the conversation no longer fits the context. */
export const SHORTENED_OBSERVATION_CHARS = 300;

/** A chat message with what the window needs to know about it. */
export interface WindowEntry {
  message: ChatMessage;
  /** `task`: a task of the user; `observation`: what came back from code (tool results, notices); else `turn`. */
  kind: "task" | "observation" | "turn";
}

/** What {@link fitContext} did to make the messages fit. */
export interface ContextTrim {
  /** Old observations cut to a short stub. */
  shortenedObservations: number;
  /** Old steps (a model answer with its observations) or old tasks left out. */
  droppedMessages: number;
  /** The latest step's own text was cut to fit. */
  shortenedLatest: boolean;
  tokensBefore: number;
  tokensAfter: number;
  /** The prompt budget that was fitted: context minus output minus margin. */
  budgetTokens: number;
}

const require = createRequire(import.meta.url);

/**
 * A word (one piece of the tokenizer's split) longer than this is counted as its pieces of this many characters:
 * byte-pair encoding is quadratic in the length of a word (a 14 KB run of one letter took seconds, 1 MB hours), so
 * bounding the word bounds the work per character and the count is linear in the text.
 */
export const MAX_COUNTED_WORD_CHARS = 16;

/** Cuts two texts apart inside one `encode` call: the tokenizer encodes the text between special tokens alone. */
const SEPARATOR = "<|endoftext|>";

let tokenizer: { encoder: Tiktoken; words: RegExp; separator: number } | undefined;
const counted = new Map<string, number>();
/** Characters of the texts `counted` holds: bounded, so the cache cannot hold a server's memory. */
let countedChars = 0;
const countedWords = new Map<string, number>();

/** Builds the tokenizer (a second or more: run it where a pause does no harm, e.g. before a server listens). */
export function loadTokenizer(): void {
  if (tokenizer !== undefined) return;
  // The ranks (2.3 MB of JavaScript; js-tiktoken's main entry holds every encoding's, 5.6 MB) load with the first
  // count: importing moss-ts, as every context module does, must not parse them.
  const ranks = require("js-tiktoken/ranks/o200k_base") as TiktokenBPE;
  tokenizer = {
    encoder: new Tiktoken(ranks),
    words: new RegExp(ranks.pat_str, "gu"),
    separator: ranks.special_tokens[SEPARATOR]!,
  };
}

/**
 * Tokens of a text in o200k_base (an estimate for other models' tokenizers); cached by text. Linear in the text: a
 * word longer than {@link MAX_COUNTED_WORD_CHARS} counts as the sum of its pieces of that size (a few tokens more
 * than the model's tokenizer may count for it), and a special token's text (`<|endoftext|>`) counts as one token.
 */
export function countTokens(text: string): number {
  const cached = counted.get(text);
  if (cached !== undefined) return cached;
  loadTokenizer();
  const { encoder, words, separator } = tokenizer!;
  // Long words are cut out (a separator keeps their neighbours apart) and counted by their pieces, each distinct
  // piece once.
  const rest: string[] = [];
  const pieces = new Map<string, number>();
  let separators = 0;
  let from = 0;
  for (const match of text.matchAll(words)) {
    const word = match[0];
    if (word.length <= MAX_COUNTED_WORD_CHARS) continue;
    rest.push(text.slice(from, match.index), SEPARATOR);
    separators += 1;
    from = match.index + word.length;
    for (let start = 0; start < word.length; start += MAX_COUNTED_WORD_CHARS) {
      const piece = word.slice(start, start + MAX_COUNTED_WORD_CHARS);
      pieces.set(piece, (pieces.get(piece) ?? 0) + 1);
    }
  }
  rest.push(text.slice(from));
  let count = encoder.encode(rest.join(""), "all").length - separators;
  const unknown = [...pieces.keys()].filter((piece) => !countedWords.has(piece));
  if (unknown.length > 0) {
    if (countedWords.size + unknown.length > 50_000) countedWords.clear();
    let index = 0;
    let tokens = 0;
    for (const token of encoder.encode(unknown.join(SEPARATOR), "all")) {
      if (token !== separator) tokens += 1;
      else {
        countedWords.set(unknown[index++]!, tokens);
        tokens = 0;
      }
    }
    countedWords.set(unknown[index]!, tokens);
  }
  for (const [piece, times] of pieces) count += times * countedWords.get(piece)!;
  if (counted.size >= 5_000 || countedChars + text.length > 32 * 1024 * 1024) {
    counted.clear();
    countedChars = 0;
  }
  counted.set(text, count);
  countedChars += text.length;
  return count;
}

/** Tokens of one chat message, with the few tokens of framing every message costs. */
export function messageTokens(message: ChatMessage): number {
  const calls = message.role === "assistant" && message.toolCalls ? JSON.stringify(message.toolCalls) : "";
  const images = message.role === "user" || message.role === "tool" ? (message.images ?? []) : [];
  const imageTokens = images.reduce(
    (sum, image) => sum + (image.detail === "low" ? LOW_DETAIL_IMAGE_TOKENS : IMAGE_TOKENS),
    0,
  );
  return countTokens(message.content) + (calls === "" ? 0 : countTokens(calls)) + imageTokens + 4;
}

/** What one image costs in the prompt (OpenAI's high-detail tile count for a 1024×1024 image; `low` is flat). */
export const IMAGE_TOKENS = 765;
export const LOW_DETAIL_IMAGE_TOKENS = 85;

/** Tokens of a whole request's messages. */
export function requestTokens(messages: ChatMessage[]): number {
  return messages.reduce((sum, message) => sum + messageTokens(message), 3);
}

/** The prompt budget of a context: what is left after the output and the safety margin. */
export function promptBudget(contextTokens: number, maxTokens: number): number {
  return Math.floor(contextTokens - maxTokens - contextTokens * CONTEXT_MARGIN_RATIO);
}

/**
 * Makes a request fit `budgetTokens`: first old observations are cut to a stub (oldest first), then old steps
 * and tasks are left out (oldest first), and last the latest step's text is cut. The system prompt, the latest
 * task and the latest step are kept. The conversation itself is not changed: only what is sent.
 * Throws a `model-request` error when the system prompt and the task alone do not fit.
 */
export function fitContext(
  system: ChatMessage,
  entries: WindowEntry[],
  budgetTokens: number,
): { messages: ChatMessage[]; trim: ContextTrim | undefined } {
  const all = () => [system, ...wellFormed(entries.map((entry) => entry.message))];
  const tokensBefore = requestTokens(all());
  if (tokensBefore <= budgetTokens) return { messages: all(), trim: undefined };
  const trim: ContextTrim = {
    shortenedObservations: 0,
    droppedMessages: 0,
    shortenedLatest: false,
    tokensBefore,
    tokensAfter: tokensBefore,
    budgetTokens,
  };
  const work: Array<WindowEntry & { dropped?: boolean }> = entries.map((entry) => ({
    ...entry,
    message: { ...entry.message } as ChatMessage,
  }));
  const taskIndex = work.findLastIndex((entry) => entry.kind === "task");
  // The latest step: the last model answer and everything after it.
  const lastAnswer = work.findLastIndex((entry) => entry.message.role === "assistant");
  const latestStart = Math.max(lastAnswer === -1 ? work.length : lastAnswer, taskIndex + 1);
  const keep = () => work.filter((entry) => !entry.dropped);
  const fits = () =>
    requestTokens([system, ...wellFormed(keep().map((entry) => entry.message))]) <= budgetTokens;

  for (let index = 0; index < latestStart && !fits(); index++) {
    const entry = work[index]!;
    if (entry.kind !== "observation" || entry.message.content.length <= SHORTENED_OBSERVATION_CHARS) continue;
    const was = countTokens(entry.message.content);
    entry.message.content = `${truncateMiddle(entry.message.content, SHORTENED_OBSERVATION_CHARS)}\n[shortened to fit the context window; it was ${was} tokens]`;
    trim.shortenedObservations += 1;
  }
  // Leave out whole steps, oldest first: an answer goes together with the observations that follow it.
  while (!fits()) {
    const candidate = work.findIndex(
      (entry, index) => index < latestStart && index !== taskIndex && !entry.dropped,
    );
    if (candidate === -1) break;
    let end = candidate + 1;
    if (work[candidate]!.message.role === "assistant") {
      while (end < latestStart && end !== taskIndex && work[end]!.kind === "observation") end += 1;
    }
    for (let index = candidate; index < end; index++) work[index]!.dropped = true;
    trim.droppedMessages += end - candidate;
  }
  if (!fits()) {
    const fixed = requestTokens([system, ...(taskIndex === -1 ? [] : [work[taskIndex]!.message])]);
    if (fixed > budgetTokens) {
      throw new MossError(
        "model-request",
        `The system prompt and the task take ${fixed} tokens, more than the ${budgetTokens} the context allows (context size minus max output tokens minus a ${Math.round(CONTEXT_MARGIN_RATIO * 100)}% margin). Raise the context size (--context-tokens, MOSS_CONTEXT_TOKENS) or lower --max-tokens.`,
        { reason: "context-overflow", promptTokens: fixed, budgetTokens },
      );
    }
    // Cut the latest step's longest texts until the rest fits.
    const latest = work.slice(latestStart).filter((entry) => !entry.dropped);
    for (let round = 0; round < 8 && !fits(); round++) {
      const over =
        requestTokens([system, ...wellFormed(keep().map((entry) => entry.message))]) - budgetTokens;
      const longest = latest.reduce<(typeof latest)[number] | undefined>(
        (best, entry) =>
          best === undefined || entry.message.content.length > best.message.content.length ? entry : best,
        undefined,
      );
      if (longest === undefined || longest.message.content.length < 200) break;
      const chars = Math.max(100, longest.message.content.length - over * 4 - 200);
      longest.message.content = truncateMiddle(longest.message.content, chars);
      trim.shortenedLatest = true;
    }
  }
  const messages = [system, ...wellFormed(keep().map((entry) => entry.message))];
  trim.tokensAfter = requestTokens(messages);
  return { messages, trim };
}

/** Answers a tool call whose result is missing (the run stopped before it ran, or it was left out). */
export const INTERRUPTED_OBSERVATION =
  '<execution ok="false">\n<error kind="interrupted">\nThe run was interrupted before this code ran.\n</error>\n</execution>';

/**
 * The messages as the chat API expects them: they start with a user message, user and assistant turns
 * alternate (consecutive user messages are joined, consecutive answers without tool calls are joined), every
 * assistant tool call is answered by a tool message right after it, and no tool message is left without its call.
 */
export function wellFormed(messages: ChatMessage[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  let open: string[] = [];
  const closeOpen = () => {
    for (const id of open) out.push({ role: "tool", content: INTERRUPTED_OBSERVATION, toolCallId: id });
    open = [];
  };
  for (const message of messages) {
    if (message.role === "tool") {
      if (!open.includes(message.toolCallId)) continue;
      open = open.filter((id) => id !== message.toolCallId);
      out.push(message);
      continue;
    }
    closeOpen();
    const last = out.at(-1);
    if (message.role === "system") {
      out.push(message);
    } else if (message.role === "user") {
      if (last?.role === "user") {
        const images = [...(last.images ?? []), ...(message.images ?? [])];
        out[out.length - 1] = {
          role: "user",
          content: `${last.content}\n\n${message.content}`,
          ...(images.length === 0 ? {} : { images }),
        };
      } else out.push(message);
    } else {
      if (out.every((entry) => entry.role === "system")) continue;
      if (last?.role === "assistant" && (last.toolCalls === undefined || last.toolCalls.length === 0)) {
        const content = [last.content, message.content].filter((text) => text !== "").join("\n\n");
        out[out.length - 1] =
          message.toolCalls && message.toolCalls.length > 0
            ? { role: "assistant", content, toolCalls: message.toolCalls }
            : { role: "assistant", content };
      } else {
        out.push(message);
      }
      open = (message.toolCalls ?? []).map((call) => call.id);
    }
  }
  closeOpen();
  return out;
}

/** The one-line summary of a context trim, for the `context-trimmed` event. */
export function describeTrim(trim: ContextTrim, contextTokens: number): string {
  const parts: string[] = [];
  if (trim.shortenedObservations > 0)
    parts.push(`shortened ${trim.shortenedObservations} old observation(s)`);
  if (trim.droppedMessages > 0) parts.push(`left out ${trim.droppedMessages} old message(s)`);
  if (trim.shortenedLatest) parts.push("cut the latest step");
  return `The conversation (${trim.tokensBefore} tokens) does not fit the context of ${contextTokens} tokens (${trim.budgetTokens} for the prompt): ${parts.join(", ") || "nothing could be shortened"}; ${trim.tokensAfter} tokens sent. The session keeps every message.`;
}
