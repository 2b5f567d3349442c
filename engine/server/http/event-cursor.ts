import { ServerError } from "../server-error.ts";

/**
 * A thread event id a client sends back (`Last-Event-ID`, `?after=`, the parts of an AG-UI event id): a
 * non-negative safe integer, else 400 `event-id-invalid` naming `name`. The one reader of them, for every route.
 */
export function eventId(text: string, name: string): number {
  const trimmed = text.trim();
  const value = Number(trimmed);
  if (!/^\d+$/.test(trimmed) || !Number.isSafeInteger(value)) {
    throw new ServerError(
      400,
      "event-id-invalid",
      `${name} must be an event id (a non-negative integer), got "${text.slice(0, 200)}".`,
    );
  }
  return value;
}

/** Refuses an event id past the thread's last (`last`) with 400 `event-id-unknown`: no stream waits for it. */
export function checkEventKnown(after: number, last: number, threadId: string): void {
  if (after > last) {
    throw new ServerError(
      400,
      "event-id-unknown",
      `Event ${after} does not exist yet: the last event of thread "${threadId}" is ${last}.`,
    );
  }
}
