import { ServerError } from "./server-error.ts";

/** The most a thread's `metadata` may take, as JSON text in UTF-8 bytes (a larger one is `413 metadata-too-large`). */
export const MAX_METADATA_BYTES = 16 * 1024;

/**
 * The most one page of a list answer (`GET /v1/threads`) holds, in bytes of JSON as stored: a page ends before the
 * item that would pass it (it always holds one) and says `next` when more remain.
 */
export const LIST_PAGE_BYTES = 1024 * 1024;

/**
 * The most an event stream reads from the database at once for one reader, in bytes of stored event JSON (it always
 * reads one event): a reader that does not read holds at most this page and the socket's buffers, since the
 * stream writes the next event only once the socket took the last one.
 */
export const EVENT_PAGE_BYTES = 256 * 1024;

/** Refuses thread metadata larger than {@link MAX_METADATA_BYTES} (`413 metadata-too-large`, naming `metadata`). */
export function checkMetadataSize(metadata: Record<string, unknown> | undefined): void {
  if (metadata === undefined) return;
  const bytes = Buffer.byteLength(JSON.stringify(metadata));
  if (bytes > MAX_METADATA_BYTES) {
    throw new ServerError(
      413,
      "metadata-too-large",
      `"metadata" takes ${bytes} bytes as JSON; a thread's metadata may take at most ${MAX_METADATA_BYTES}.`,
    );
  }
}
