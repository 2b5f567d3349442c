// The server's defaults that `moss serve`'s settings table (engine/cli/settings.ts) shows too: the worker's slots,
// lease and takeovers, the limits every tenant gets, the HTTP timeouts and the log's levels. A leaf rule of the
// foundation, written once here and read by the worker, the HTTP app, the log and the table, so `--help`,
// docs/reference/settings.md and the server cannot disagree; the table reads them without loading the server.

/** Runs one worker executes at once. */
export const DEFAULT_CONCURRENCY = 8;

/** How long a claim holds without a heartbeat (ms); a worker silent that long loses its runs. */
export const DEFAULT_LEASE_MS = 30_000;

/** How many times a run may be taken over from a lost worker before it fails without running again. */
export const DEFAULT_MAX_TAKEOVERS = 3;

/** Limits of one tenant. */
export interface TenantLimits {
  /** Runs queued, running or waiting for a person at once (more is 429 `too-many-runs`). */
  maxActiveRuns: number;
  /** Bytes of a request body (more is 413 `body-too-large`). */
  maxBodyBytes: number;
}

/** The limits every tenant gets unless configured otherwise. */
export const DEFAULT_TENANT_LIMITS: Readonly<TenantLimits> = Object.freeze({
  maxActiveRuns: 100,
  maxBodyBytes: 1_048_576,
});

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

/** The levels of the operator's log (`--log-level`, pino's), lowest volume first. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/** One of {@link LOG_LEVELS}. */
export type LogLevel = (typeof LOG_LEVELS)[number];
