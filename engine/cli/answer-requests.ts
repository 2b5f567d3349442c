import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
// Node's own readline, not a prompt library: the questions are a yes/no, a reason and a line of text (or a
// choice's number), which need no arrow-key menus; it adds no dependency, works in any terminal (also `TERM=dumb`),
// and reads from the command's own `io.stdin`, so tests drive it with a stream.
import { createInterface, type Interface } from "node:readline";
import type { Readable, Writable } from "node:stream";
import { MossError } from "../errors.ts";
import { answerShapeProblem } from "../runtime/answers.ts";
import type { Answer, Answers, PendingRequest } from "../types.ts";

/** The reason given for every call `--approve none` denies. */
export const DENIED_BY_FLAG = "denied by --approve none";

/** Where the answers to a paused run's requests come from, consulted in this order. */
export interface AnswerSources {
  /** Answers by request id (from `--answers <file>`). */
  file?: Answers;
  /** `--approve all|none`: answers every approval without asking. */
  approve?: "all" | "none";
  /** Asks a person (on a TTY); undefined when no one can be asked. */
  person?: PersonPrompt;
}

/** Answers what the sources can; the rest are returned as unanswered (the run then stays paused). */
export async function answerRequests(
  requests: PendingRequest[],
  sources: AnswerSources,
): Promise<{ answers: Answers; unanswered: PendingRequest[] }> {
  const answers: Answers = {};
  const unanswered: PendingRequest[] = [];
  for (const request of requests) {
    const answer =
      sources.file?.[request.id] ??
      (request.kind === "approval" && sources.approve !== undefined
        ? sources.approve === "all"
          ? { approved: true }
          : { approved: false, reason: DENIED_BY_FLAG }
        : await sources.person?.ask(request));
    if (answer === undefined) unanswered.push(request);
    else answers[request.id] = answer;
  }
  return { answers, unanswered };
}

/** Reads `--answers <file>` (or `-` for stdin): a JSON object mapping request ids to answers. */
export async function readAnswersFile(source: string, cwd: string, stdin: Readable): Promise<Answers> {
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
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new MossError(
      "invalid-argument",
      `--answers ${source}: not valid JSON (${(error as Error).message})`,
      { file: source },
    );
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    throw new MossError(
      "invalid-argument",
      `--answers ${source}: expected an object mapping request ids to answers, e.g. {"r1": {"approved": true}, "r2": {"answer": "blue"}}.`,
      { file: source },
    );
  }
  for (const [id, answer] of Object.entries(json)) {
    if (answerShapeProblem(answer) !== undefined) {
      throw new MossError(
        "invalid-argument",
        `--answers ${source}: the answer to "${id}" must be {"approved": true}, {"approved": false, "reason": "…"} or {"answer": "…"}; got ${JSON.stringify(answer)}.`,
        { file: source, id },
      );
    }
  }
  return json as Answers;
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
      const target = request.service === undefined ? request.member : `${request.service}.${request.member}`;
      while (true) {
        const reply = await this.#question(`Approve ${target} (#${request.id})? [y/n] `);
        if (reply === undefined) return undefined;
        if (/^y(es)?$/i.test(reply)) return { approved: true };
        if (/^no?$/i.test(reply)) {
          const reason = await this.#question("Reason for the model (optional, Enter to skip): ");
          return reason === undefined || reason === "" ? { approved: false } : { approved: false, reason };
        }
      }
    }
    const choices = request.choices ?? [];
    const lines = [request.question, ...choices.map((choice, index) => `  ${index + 1}) ${choice}`)];
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
