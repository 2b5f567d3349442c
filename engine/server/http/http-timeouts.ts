import { type Server, type ServerOptions, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { MossError } from "../../errors.ts";
import { DEFAULT_HTTP_TIMEOUTS, type HttpTimeouts } from "../../server-defaults.ts";
import { ServerError } from "../server-error.ts";

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

/**
 * Answers what Node refuses before a request reaches the API (a client too slow for the timeouts, a request it cannot
 * parse, headers too large) in the API's error shape, `{ error: { code, message } }`, where Node would write a bare
 * status line: 408 `request-timeout`, 431 `headers-too-large`, else 400 `bad-request`. As Node does, nothing is
 * written once a response has begun, and the connection is closed.
 */
export function answerClientErrors(server: Server, timeouts: Partial<HttpTimeouts> = {}): void {
  const headersTimeoutMs = timeouts.headersTimeoutMs ?? DEFAULT_HTTP_TIMEOUTS.headersTimeoutMs;
  const requestTimeoutMs = timeouts.requestTimeoutMs ?? DEFAULT_HTTP_TIMEOUTS.requestTimeoutMs;
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    const response = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (error.code !== "ECONNRESET" && socket.writable && response?.headersSent !== true) {
      const refusal =
        error.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? new ServerError(
              408,
              "request-timeout",
              `The request did not arrive in time: this server allows ${headersTimeoutMs} ms for its headers and ${requestTimeoutMs} ms for the whole request.`,
            )
          : error.code === "HPE_HEADER_OVERFLOW"
            ? new ServerError(
                431,
                "headers-too-large",
                "The request's headers are larger than this server accepts.",
              )
            : new ServerError(400, "bad-request", "The request is not valid HTTP/1.1.");
      const body = JSON.stringify(refusal.toJSON());
      socket.write(
        `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status]}\r\n` +
          "Content-Type: application/json; charset=utf-8\r\n" +
          `Content-Length: ${Buffer.byteLength(body)}\r\n` +
          "Connection: close\r\n\r\n" +
          body,
      );
    }
    socket.destroy(error);
  });
}
