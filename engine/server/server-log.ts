import { type DestinationStream, type Logger, pino } from "pino";
import { MossError } from "../errors.ts";
import { LOG_LEVELS } from "../server-defaults.ts";

/** The operator's log of a server: JSON lines (pino), one record per thing that happened to a run. */
export type ServerLogger = Logger;

/** A JSON-lines logger at `level` to `destination` (default stderr: stdout carries the server's ready line). */
export function createServerLogger(
  level: string = "info",
  destination: DestinationStream | NodeJS.WritableStream = process.stderr,
): ServerLogger {
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new MossError(
      "invalid-argument",
      `the log level must be one of ${LOG_LEVELS.join(", ")}, got "${level}"`,
      { level },
    );
  }
  return pino({ level, base: { service: "moss" } }, destination as DestinationStream);
}

/** What the operator's log keeps of an error: its code, message and the details a model error carries. */
export function loggedError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const coded = error as Error & { code?: unknown; details?: Record<string, unknown>; status?: unknown };
  const cause = error.cause as (Error & { status?: unknown; error?: unknown }) | undefined;
  return {
    name: error.name,
    message: error.message,
    ...(typeof coded.code === "string" ? { code: coded.code } : {}),
    ...(MossError.is(error) ? { details: withoutPartial(error.details) } : {}),
    ...(cause instanceof Error
      ? {
          cause: {
            name: cause.name,
            message: cause.message,
            ...(cause.status === undefined ? {} : { status: cause.status }),
            ...(cause.error === undefined ? {} : { body: cause.error }),
          },
        }
      : {}),
  };
}

/** A model error's details without the partial answer (the conversation has it). */
function withoutPartial(details: Record<string, unknown>): Record<string, unknown> {
  const { partial: _partial, ...rest } = details;
  return rest;
}
