import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
// Node's own readline, not a prompt library: the questions are a yes/no, a reason and a line of text (or a
// choice's number), which need no arrow-key menus; it adds no dependency, works in any terminal (also `TERM=dumb`),
// and reads from the command's own `io.stdin`, so tests drive it with a stream.
import { createInterface, type Interface } from "node:readline";
import type { Readable, Writable } from "node:stream";
import { isDeepStrictEqual } from "node:util";
import { answerShapeProblem, callPartOf } from "../answers.ts";
import { MossError } from "../errors.ts";
import { formatReturns } from "../format-value.ts";
import { parseJsonText } from "../read-json-file.ts";
import type { Answer, Answers, ApprovalRequest, PendingRequest } from "../types.ts";
import { escapeControlCharacters } from "./escape-control-characters.ts";

/** The reason given for every call `--approve none` denies. */
export const DENIED_BY_FLAG = "denied by --approve none";

/** The most characters of a call's arguments shown to the person deciding (the rest is cut with `…`). */
export const MAX_SHOWN_ARGUMENTS_CHARS = 200;

/**
 * An answer from `--answers <file>`, which may also name the request the person saw: the call (`member` as
 * `service.member`, `args`) or the `question`. A named answer is used only for that very request.
 */
export type NamedAnswer = Answer & { member?: string; args?: unknown[]; question?: string };

/** Answers by request id, as read from `--answers <file>`. */
export type NamedAnswers = Record<string, NamedAnswer>;

/** A file answer given for another request than the one now waiting under its id. */
export interface MismatchedAnswer {
  request: PendingRequest;
  /** What the answer named and what the run asks now. */
  reason: string;
}

/** Where the answers to a paused run's requests come from, consulted in this order. */
export interface AnswerSources {
  /** Answers by request id (from `--answers <file>`). */
  file?: NamedAnswers;
  /** `--approve all|none`: answers every approval without asking. */
  approve?: "all" | "none";
  /** Asks a person (on a TTY); undefined when no one can be asked. */
  person?: PersonPrompt;
}

/**
 * Answers what the sources can; the rest are returned as unanswered (the run then stays paused). A file answer that
 * names another call or question than the one now waiting under its id is returned as mismatched, and the caller
 * must not resume: the person approved something else.
 */
export async function answerRequests(
  requests: PendingRequest[],
  sources: AnswerSources,
): Promise<{ answers: Answers; unanswered: PendingRequest[]; mismatched: MismatchedAnswer[] }> {
  const answers: Answers = {};
  const unanswered: PendingRequest[] = [];
  const mismatched: MismatchedAnswer[] = [];
  for (const request of requests) {
    // The file goes with this one run: it may name a request by its full id or by its call alone (`r2`, as before
    // ids carried the run's tag), and a named call or question still guards what it answers.
    const file = sources.file;
    const named =
      file === undefined
        ? undefined
        : Object.hasOwn(file, request.id)
          ? file[request.id]
          : Object.hasOwn(file, callPartOf(request.id))
            ? file[callPartOf(request.id)]
            : undefined;
    if (named !== undefined) {
      const reason = answerMismatch(request, named);
      if (reason !== undefined) mismatched.push({ request, reason });
      else answers[request.id] = plainAnswer(named);
      continue;
    }
    const answer =
      request.kind === "approval" && sources.approve !== undefined
        ? sources.approve === "all"
          ? { approved: true }
          : { approved: false, reason: DENIED_BY_FLAG }
        : await sources.person?.ask(request);
    if (answer === undefined) unanswered.push(request);
    else answers[request.id] = answer;
  }
  return { answers, unanswered, mismatched };
}

/** `service.member`, as the person reads it and an answer names it. */
export function callTarget(request: ApprovalRequest): string {
  return request.service === undefined ? request.member : `${request.service}.${request.member}`;
}

/** The call a request waits on, on one line: `shop.deleteProduct(5, "old")`, the arguments cut at a bound. */
export function describeCall(request: ApprovalRequest): string {
  const args = request.args
    .map((arg) => formatReturns(arg))
    .join(", ")
    .replace(/\s*\n\s*/g, " ");
  const shown =
    args.length > MAX_SHOWN_ARGUMENTS_CHARS ? `${args.slice(0, MAX_SHOWN_ARGUMENTS_CHARS - 1)}…` : args;
  return escapeControlCharacters(`${callTarget(request)}(${shown})`);
}

/** The line of the model's code that made the request, as its code frame marks it (`> 4 |   await …`). */
export function requestLine(request: PendingRequest): string | undefined {
  const marked = request.code?.split("\n").find((line) => line.startsWith(">"));
  return marked === undefined ? undefined : escapeControlCharacters(marked);
}

/** Why a file answer does not answer `request` (it names another call or question), or undefined when it does. */
function answerMismatch(request: PendingRequest, named: NamedAnswer): string | undefined {
  const asked =
    request.kind === "approval"
      ? describeCall(request)
      : `the question ${escapeControlCharacters(JSON.stringify(request.question))}`;
  if (request.kind === "approval") {
    const member = named.member === undefined || named.member === callTarget(request);
    const args = named.args === undefined || isDeepStrictEqual(asData(named.args), asData(request.args));
    if (member && args) return undefined;
    const given = `${named.member ?? callTarget(request)}(${(named.args ?? request.args).map((arg) => formatReturns(arg)).join(", ")})`;
    return `the answer was given for ${escapeControlCharacters(given)}, but #${request.id} now asks to approve ${asked}`;
  }
  if (named.question === undefined || named.question === request.question) return undefined;
  return `the answer was given for the question ${escapeControlCharacters(JSON.stringify(named.question))}, but #${request.id} now asks ${asked}`;
}

/** Values as JSON carries them, so arguments read from a file compare with those the run logged. */
function asData(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value ?? null));
}

/** The answer alone, without the names of the request it was given for. */
function plainAnswer(named: NamedAnswer): Answer {
  if ("answer" in named) return { answer: named.answer };
  if (named.approved) return { approved: true };
  return named.reason === undefined ? { approved: false } : { approved: false, reason: named.reason };
}

/**
 * What `--answers <file>` could hold for `requests`: each answer names the request the person saw (the call and its
 * arguments, or the question), so it cannot approve another call that later takes the same id.
 */
export function answersTemplate(requests: PendingRequest[]): NamedAnswers {
  return Object.fromEntries(
    requests.map((request): [string, NamedAnswer] => [
      request.id,
      request.kind === "approval"
        ? { approved: true, member: callTarget(request), args: asData(request.args) as unknown[] }
        : { answer: request.choices?.[0] ?? "…", question: request.question },
    ]),
  );
}

/** Reads `--answers <file>` (or `-` for stdin): a JSON object mapping request ids to answers. */
export async function readAnswersFile(source: string, cwd: string, stdin: Readable): Promise<NamedAnswers> {
  let text: string;
  try {
    if (source === "-") {
      const chunks: Buffer[] = [];
      for await (const chunk of stdin)
        chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
      text = Buffer.concat(chunks).toString("utf8");
    } else {
      text = await readFile(resolve(cwd, source), "utf8");
    }
  } catch (error) {
    throw new MossError(
      "invalid-argument",
      `--answers ${source}: cannot read (${(error as NodeJS.ErrnoException).code ?? error})`,
      { file: source },
    );
  }
  const json = parseJsonText(
    text,
    (error) =>
      new MossError("invalid-argument", `--answers ${source}: not valid JSON (${error.message})`, {
        file: source,
      }),
  );
  // The shape of the answer itself is the runtime's one rule; the fields that name the request are the CLI's own.
  const namesProblem = (answer: Record<string, unknown>): boolean =>
    (answer.question !== undefined && typeof answer.question !== "string") ||
    (answer.member !== undefined && typeof answer.member !== "string") ||
    (answer.args !== undefined && !Array.isArray(answer.args));
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    throw new MossError(
      "invalid-argument",
      `--answers ${source}: expected an object mapping request ids to answers, e.g. {"r1": {"approved": true}, "r2": {"answer": "blue"}}.`,
      { file: source },
    );
  }
  for (const [id, answer] of Object.entries(json)) {
    if (answerShapeProblem(answer) !== undefined || namesProblem(answer as Record<string, unknown>)) {
      throw new MossError(
        "invalid-argument",
        `--answers ${source}: the answer to "${id}" must be {"approved": true}, {"approved": false, "reason": "…"} or {"answer": "…"} (optionally naming the request: "member" and "args", or "question"); got ${JSON.stringify(answer)}.`,
        { file: source, id },
      );
    }
  }
  return json as NamedAnswers;
}

/** Asks a person at a terminal, one line per question; the requests themselves are printed before. */
export class PersonPrompt {
  readonly #input: Readable;
  readonly #output: Writable;
  #lines: Interface | undefined;
  #closed = false;
  /** Lines typed before a question asked for them. */
  readonly #typed: string[] = [];
  /** Questions waiting for a line. */
  readonly #waiting: Array<(line: string | undefined) => void> = [];

  constructor(input: Readable, output: Writable & { isTTY?: boolean }) {
    this.#input = input;
    this.#output = output;
  }

  /** The person's answer to `request`, or undefined when the input ended first. */
  async ask(request: PendingRequest): Promise<Answer | undefined> {
    if (request.kind === "approval") {
      // The person sees the call itself: member, arguments (bounded) and the line of code that makes it.
      const line = requestLine(request);
      if (line !== undefined) this.#output.write(`${line}\n`);
      const at = request.line === undefined ? "" : ` at line ${request.line}`;
      while (true) {
        const reply = await this.#question(`Approve ${describeCall(request)}${at} (#${request.id})? [y/n] `);
        if (reply === undefined) return undefined;
        if (/^y(es)?$/i.test(reply)) return { approved: true };
        if (/^no?$/i.test(reply)) {
          const reason = await this.#question("Reason for the model (optional, Enter to skip): ");
          return reason === undefined || reason === "" ? { approved: false } : { approved: false, reason };
        }
      }
    }
    const choices = request.choices ?? [];
    const lines = [request.question, ...choices.map((choice, index) => `  ${index + 1}) ${choice}`)].map(
      escapeControlCharacters,
    );
    this.#output.write(`${lines.join("\n")}\n`);
    // The runtime takes only one of the choices when the code offered some (a number or the choice's text).
    const prompt =
      choices.length > 0
        ? `Answer (#${request.id}: 1-${choices.length} or the choice): `
        : `Answer (#${request.id}): `;
    while (true) {
      const reply = await this.#question(prompt);
      if (reply === undefined) return undefined;
      if (reply === "") continue;
      if (choices.length === 0) return { answer: reply };
      const number = Number(reply);
      if (Number.isInteger(number) && number >= 1 && number <= choices.length) {
        return { answer: choices[number - 1]! };
      }
      const named = choices.find((choice) => choice.toLowerCase() === reply.toLowerCase());
      if (named !== undefined) return { answer: named };
      this.#output.write(`Pick one of the ${choices.length} choices.\n`);
    }
  }

  /** Stops reading the input (the process can exit). */
  close(): void {
    this.#lines?.close();
  }

  /** Writes `text` and returns the next line typed (lines typed ahead are kept in order), or undefined at the end. */
  async #question(text: string): Promise<string | undefined> {
    if (this.#lines === undefined) {
      const lines = createInterface({ input: this.#input, output: this.#output });
      lines.on("line", (line) => {
        const waiting = this.#waiting.shift();
        if (waiting !== undefined) waiting(line);
        else this.#typed.push(line);
      });
      lines.once("close", () => {
        this.#closed = true;
        for (const waiting of this.#waiting.splice(0)) waiting(undefined);
      });
      this.#lines = lines;
    }
    this.#output.write(text);
    const typed = this.#typed.shift();
    if (typed !== undefined) return typed.trim();
    if (this.#closed) return undefined;
    const line = await new Promise<string | undefined>((resolve) => this.#waiting.push(resolve));
    return line?.trim();
  }
}
