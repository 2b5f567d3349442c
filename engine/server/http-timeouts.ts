import type { ServerOptions } from "node:http";
import { MossError } from "../errors.ts";

/** How long a client may take to send a request: its headers, and the whole request with its body. */
export interface HttpTimeouts {
  /** Time to receive a request's headers; a client slower than that gets 408 and the connection is closed. */
  headersTimeoutMs: number;
  /** Time to receive the whole request, body included (not the response: event streams stay open); else 408. */
  requestTimeoutMs: number;
}

/** The timeouts of `moss serve` unless configured otherwise (Node's own are 60 s and 300 s). */
export const DEFAULT_HTTP_TIMEOUTS: Readonly<HttpTimeouts> = Object.freeze({
  headersTimeoutMs: 15_000,
  requestTimeoutMs: 60_000,
});

/** The least either timeout may be. */
const MIN_TIMEOUT_MS = 100;

/**
 * The Node HTTP server options that enforce the timeouts (over the defaults); a timeout under 100 ms, or headers
 * allowed longer than the whole request, is MossError `config-invalid`.
 */
export function httpServerOptions(timeouts: Partial<HttpTimeouts> = {}): ServerOptions {
  const headersTimeoutMs = timeouts.headersTimeoutMs ?? DEFAULT_HTTP_TIMEOUTS.headersTimeoutMs;
  const requestTimeoutMs = timeouts.requestTimeoutMs ?? DEFAULT_HTTP_TIMEOUTS.requestTimeoutMs;
  for (const [name, value] of Object.entries({ headersTimeoutMs, requestTimeoutMs })) {
    if (!Number.isSafeInteger(value) || value < MIN_TIMEOUT_MS) {
      throw new MossError(
        "config-invalid",
        `${name} must be an integer of at least ${MIN_TIMEOUT_MS} milliseconds, got ${value}.`,
        { [name]: value },
      );
    }
  }
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new MossError(
      "config-invalid",
      `headersTimeoutMs (${headersTimeoutMs}) must not be more than requestTimeoutMs (${requestTimeoutMs}): the request's time includes its headers.`,
      { headersTimeoutMs, requestTimeoutMs },
    );
  }
  return {
    headersTimeout: headersTimeoutMs,
    requestTimeout: requestTimeoutMs,
    // Node looks for late requests this often (30 s by default, which would stretch a short timeout far past itself).
    connectionsCheckingInterval: Math.min(1_000, Math.ceil(headersTimeoutMs / 4)),
  };
}
