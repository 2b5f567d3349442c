// The server's defaults that `moss serve`'s settings table (engine/cli/settings.ts) shows too: the worker's slots,
// lease and takeovers, and the limits every tenant gets. Written once here, read by the worker, the HTTP app and the
// table, so `--help`, docs/reference/settings.md and the server cannot disagree.

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
