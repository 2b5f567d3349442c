// The fields of an AG-UI `RunAgentInput` this endpoint reads: the checked input, the user's text and images, the
// resume entries as native answers, and the `Last-Event-ID` this endpoint sent.
import type { RunAgentInput } from "@ag-ui/core";
import type { Context } from "hono";
import { ServerError } from "../../server-error.ts";
import { eventId } from "../event-cursor.ts";
import { readJson } from "../read-json-body.ts";

const THREAD_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

/** The native answers of AG-UI resume entries: a cancelled interrupt is a denial (or an empty answer). */
export function answersOf(resume: NonNullable<RunAgentInput["resume"]>): Record<string, unknown> {
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

export function textOf(content: unknown): string {
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
export function imagePartsOf(content: unknown): unknown[] {
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
export async function readInput(c: Context, maxBytes: number): Promise<RunAgentInput> {
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

export function parseLastEventId(
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
