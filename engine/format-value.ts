// How a value is shown, to the model and to a person, a leaf rule of the foundation: the agent's observation, the
// agent's and `moss run`'s request lines and `moss run`'s `returned:` line all read it, and the CLI without loading
// the agent.
import { inspect } from "node:util";
import type { PendingRequest } from "./types.ts";

/** Cuts `text` to at most `maxChars`, keeping head and tail around a visible marker naming what was cut. */
export function truncateMiddle(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const marker = (cut: number) => `\n… [truncated ${cut} characters] …\n`;
  const room = Math.max(0, maxChars - marker(text.length).length);
  const head = Math.ceil((room * 2) / 3);
  const tail = room - head;
  const cut = text.length - head - tail;
  return `${text.slice(0, head)}${marker(cut)}${tail > 0 ? text.slice(text.length - tail) : ""}`;
}

/**
 * Renders the return value of the model's code for the model to read: a string as JSON (its exact text, escapes
 * included), anything else as {@link formatValue} shows it.
 */
export function formatReturns(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  return formatValue(value);
}

/**
 * The one way a value the code returned or passed is shown, to the model and to a person (`moss run`'s
 * `returned:` line): Node's inspect, six levels deep, lines up to 100 characters, 100 items of an array and 2,000
 * characters of a string at most, keys in their own order.
 */
export function formatValue(value: unknown): string {
  return inspect(value, {
    depth: 6,
    breakLength: 100,
    maxArrayLength: 100,
    maxStringLength: 2_000,
    sorted: false,
    colors: false,
  });
}

/** One line naming a request a paused run waits for: `#id approval robot.move(90, 50) at line 3` or the question. */
export function describeRequest(request: PendingRequest): string {
  const at = request.line === undefined ? "" : ` at line ${request.line}`;
  if (request.kind === "approval") {
    const target = request.service === undefined ? request.member : `${request.service}.${request.member}`;
    const args = request.args.map((arg) => formatReturns(arg)).join(", ");
    // What the call acts on, unless the field it was called through says it already.
    const on =
      request.target === undefined || request.target.split(":")[0] === `moss.${request.service}`
        ? ""
        : ` on ${request.target}`;
    return `#${request.id} approval ${target}(${truncateMiddle(args, 300)})${on}${at}`;
  }
  const choices = request.choices === undefined ? "" : ` [${request.choices.join(" | ")}]`;
  return `#${request.id} question${at}: ${request.question}${choices}`;
}
