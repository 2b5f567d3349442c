import { MossError } from "../errors.ts";
import { redactHostPaths, redactHostRoots, SecretRedactor } from "../membrane/index.ts";

/** What a tenant reads of a run that failed, instead of the failure itself (the operator's log has that). */
export interface TenantFailure {
  /**
   * Stable: `model-unavailable`, `server-error`, or a code a tenant can act on (`context-overflow`,
   * `continuation-invalid`).
   */
  code: string;
  message: string;
}

/** Every fixed text a tenant reads of a failure, with its code. */
export const TENANT_FAILURES = Object.freeze({
  "model-unavailable": "The model is unavailable; try again later.",
  "server-error": "The run failed on the server; its operator's log has the details.",
  "context-overflow":
    "The conversation does not fit the model's context; send a shorter message or start a new thread.",
} as const);

/** Codes of engine errors a tenant may read as they are (redacted): they are about the tenant's own run. */
const TENANT_CODES = new Set(["continuation-invalid"]);

/**
 * The one redactor of everything a tenant reads (events, runs, threads, AG-UI, the playground): it knows every secret
 * the server holds (the model's API key and base URL, the database URL and its password, the tenants' secrets, the
 * continuation key, and every secret the module's bindings hold in this process, see `SecretRedactor`), removes them
 * and the host's folders from text, keeps the server's own state out of events (saved contexts, continuations), and
 * turns a run's failure into a stable code a tenant can read.
 */
export class TenantView {
  readonly #secrets = new SecretRedactor({ processSecrets: true });

  constructor(secrets: Iterable<string | undefined> = []) {
    for (const secret of secrets) if (secret !== undefined) this.addSecret(secret);
  }

  /** Adds a secret of the server (a URL adds its password, and itself). */
  addSecret(secret: string): void {
    if (secret.trim() === "") return;
    this.#secrets.add(secret);
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(secret) && URL.canParse(secret)) {
      const url = new URL(secret);
      if (url.password !== "") {
        this.#secrets.add(url.password);
        this.#secrets.add(decodeURIComponent(url.password));
      }
      // The URL as URL() spells it (a trailing slash, lower-cased host) and without its path.
      this.#secrets.add(url.href);
      this.#secrets.add(url.host === "" ? url.href : `${url.protocol}//${url.host}`);
    }
  }

  /** Text a tenant reads: without the server's secrets and the host's folders. */
  text(text: string): string {
    return redactHostRoots(this.#secrets.redactText(text));
  }

  /** A copy of plain data with every string (and key) as {@link text} gives it. */
  value<T>(value: T): T {
    return this.#walk(this.#secrets.redactValue(value), 0) as T;
  }

  /** What a tenant reads of the failure that ended a run: a stable code and a sentence with nothing of the operator. */
  failure(error: unknown): TenantFailure {
    const code = MossError.is(error) ? error.code : isTenantFailure(error) ? error.code : undefined;
    if (MossError.is(error) && error.details.reason === "context-overflow") {
      return { code: "context-overflow", message: TENANT_FAILURES["context-overflow"] };
    }
    if (code?.startsWith("model-")) {
      return { code: "model-unavailable", message: TENANT_FAILURES["model-unavailable"] };
    }
    if (code !== undefined && (TENANT_CODES.has(code) || code in TENANT_FAILURES)) {
      const message = (error as { message?: unknown }).message;
      return { code, message: redactHostPaths(this.text(String(message ?? ""))) };
    }
    return { code: "server-error", message: TENANT_FAILURES["server-error"] };
  }

  /**
   * The stored (and streamed) form of an agent event: what the conversation needs, never the saved context, a
   * continuation or a host path, and no secret. Events already in this form come out the same.
   */
  event<E extends { type: string }>(event: E): E {
    const data = event as Record<string, any>;
    if (event.type === "error") {
      const failure = this.failure(data.error);
      return this.value({ ...event, error: failure, message: failure.message });
    }
    if (event.type === "run-end" && data.stopReason === "error" && typeof data.reason === "string") {
      return this.value({ ...event, reason: redactHostPaths(this.text(data.reason)) });
    }
    return this.value(tenantEvent(event));
  }

  #walk(value: unknown, depth: number): unknown {
    if (typeof value === "string") return redactHostRoots(value);
    if (depth > 100 || value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) return value.map((item) => this.#walk(item, depth + 1));
    if (value instanceof Error) {
      const coded = value as Error & { code?: unknown };
      return {
        name: redactHostRoots(value.name),
        message: redactHostPaths(this.text(value.message)),
        ...(typeof coded.code === "string" ? { code: coded.code } : {}),
      };
    }
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) return value;
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) copy[key] = this.#walk(item, depth + 1);
    return copy;
  }
}

function isTenantFailure(value: unknown): value is TenantFailure {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as TenantFailure).code === "string" &&
    typeof (value as TenantFailure).message === "string"
  );
}

/** Message metadata that is the server's own state: the saved context, the paused step (its continuation). */
const SERVER_METADATA = new Set(["context", "pending", "chunks"]);

/** An agent event without the server's own state (see {@link TenantView.event}). */
function tenantEvent<E extends { type: string }>(event: E): E {
  const data = event as Record<string, any>;
  switch (event.type) {
    case "execution": {
      const execution = data.execution;
      if (typeof execution !== "object" || execution === null) return event;
      const { context: _context, pending, ...rest } = execution;
      return {
        ...event,
        execution: {
          ...rest,
          ...(pending === undefined ? {} : { pending: { requests: pending.requests ?? [] } }),
        },
      };
    }
    case "message": {
      const message = data.message;
      if (typeof message?.metadata !== "object" || message.metadata === null) return event;
      const metadata = Object.fromEntries(
        Object.entries(message.metadata as Record<string, unknown>).filter(
          ([key]) => !SERVER_METADATA.has(key),
        ),
      );
      return { ...event, message: { ...message, metadata } };
    }
    default:
      return event;
  }
}
