import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { MossError } from "../errors.ts";
import type { Nondeterminism } from "../sandbox/index.ts";
import type { PendingRequest } from "../types.ts";
import type { LogEntry } from "./log-entry.ts";

/*
 * A paused run as a string: everything a resume needs (the code, its target and arguments, the run's log, the data
 * as it was before the run, the pending requests), signed with HMAC-SHA256 and stamped with an expiry. The payload is
 * readable (base64url JSON), never secret: it holds what the model's code already saw. The signature makes it
 * tamper-evident and ties it to the key of the compiler that made it.
 */

const VERSION = 1;
/** Default lifetime of a continuation. */
export const DEFAULT_CONTINUATION_TTL_MS = 60 * 60 * 1000;
/** The key of compilers given none: random, so continuations resume only in this process. */
const PROCESS_KEY = randomBytes(32);

/** What a continuation carries. */
export interface ContinuationPayload {
  v: typeof VERSION;
  /** The module (its display path) and a hash of its source: a resume against another module is refused. */
  module: string;
  moduleHash: string;
  /** The session (`MossContext.id`) the run belongs to: it resumes only there. */
  session: string;
  code: string;
  target: string;
  /** Wire-encoded extra arguments and the local names passed first (as the paused execute had them). */
  args: string[];
  localArgs: string[];
  /** The run's log: completed calls with their results, calls that wait with their request. */
  log: LogEntry[];
  nondeterminism: Nondeterminism;
  /** `MossContext.properties` as they were when the run began. */
  data: Record<string, unknown>;
  requests: PendingRequest[];
  /** The run's part of its request ids (`r<call>-<tag>`, see `requestId`); absent in continuations made before it. */
  requestTag?: string;
  /** Milliseconds since the epoch. */
  issuedAt: number;
  expiresAt: number;
}

/** The signing key of a compiler: its `continuationKey`, else this process's random key. */
export function continuationKey(given: string | Uint8Array | undefined): Uint8Array {
  if (given === undefined) return PROCESS_KEY;
  const key = typeof given === "string" ? Buffer.from(given, "utf8") : given;
  if (key.length < 16) {
    throw new MossError(
      "invalid-argument",
      `continuationKey must be at least 16 bytes (it signs paused runs); got ${key.length}`,
    );
  }
  return key;
}

/**
 * How large a paused run may be: its payload is at most this many times `maxResultBytes` bytes of JSON (the log of
 * host calls up to 4x, the data before the run up to 1x, the code, the clock and random log and the requests in the
 * rest), so a continuation is at most 8x `maxResultBytes` characters (base64url adds a third) plus its signature.
 */
export const MAX_CONTINUATION_RESULTS = 6;

/**
 * Encodes and signs a paused run; `{ tooLarge }` (its payload's bytes) when the payload passes `maxPayloadBytes`.
 * Wire texts (JSON already) are written into the payload as JSON, not as strings: nothing is escaped twice.
 */
export function signContinuation(
  payload: ContinuationPayload,
  key: Uint8Array,
  maxPayloadBytes = Number.POSITIVE_INFINITY,
): { text: string } | { tooLarge: number } {
  const json = Buffer.from(
    JSON.stringify({
      ...payload,
      args: payload.args.map(embedWire),
      log: payload.log.map((entry) => ({
        ...entry,
        args: embedWire(entry.args),
        ...(entry.result === undefined
          ? {}
          : { result: { ...entry.result, wire: embedWire(entry.result.wire) } }),
      })),
    }),
    "utf8",
  );
  if (json.length > maxPayloadBytes) return { tooLarge: json.length };
  const body = json.toString("base64url");
  return { text: `moss1.${body}.${mac(body, key)}` };
}

/** A wire text (a JSON array) as the array it is; a text that is not one stays a string (it matches nothing). */
function embedWire(wire: string): unknown {
  try {
    const value = JSON.parse(wire) as unknown;
    return Array.isArray(value) ? value : wire;
  } catch {
    return wire;
  }
}

/** A wire text back from its embedded form (the same text: the wire is written by `JSON.stringify`). */
function wireOf(embedded: unknown): string {
  if (Array.isArray(embedded)) return JSON.stringify(embedded);
  if (typeof embedded === "string") return embedded;
  throw new MossError("continuation-invalid", "the continuation cannot be resumed: its log is malformed", {});
}

/**
 * The code a continuation runs, read without checking its signature (the payload is readable by design; the runtime
 * that resumes it checks everything): undefined when the text is not a continuation.
 */
export function continuationCode(text: string): string | undefined {
  const body = text.split(".")[1];
  if (body === undefined) return undefined;
  try {
    const payload = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as { code?: unknown };
    return typeof payload.code === "string" ? payload.code : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Verifies and decodes a continuation. A malformed, tampered, foreign (signed with another key) or expired one is
 * refused with `continuation-invalid`; so is one made for another module or another version of it, or in another
 * session (another context: one user's paused run must not act on another user's data).
 */
export function openContinuation(
  text: unknown,
  key: Uint8Array,
  module: { displayPath: string; hash: string; session: string },
  now = Date.now(),
): ContinuationPayload {
  const invalid = (why: string) =>
    new MossError("continuation-invalid", `the continuation cannot be resumed: ${why}`, {});
  if (typeof text !== "string")
    throw invalid(`expected a string, got ${text === null ? "null" : typeof text}`);
  const parts = text.split(".");
  if (parts.length !== 3 || parts[0] !== "moss1" || !parts[1] || !parts[2]) {
    throw invalid("it is not a moss-ts continuation (expected moss1.<payload>.<signature>)");
  }
  const [, body, signature] = parts as [string, string, string];
  const expected = Buffer.from(mac(body, key), "utf8");
  const given = Buffer.from(signature, "utf8");
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
    throw invalid(
      "its signature does not match: it was changed, or signed with another continuationKey (a compiler without one signs with a random key of its own process)",
    );
  }
  let payload: ContinuationPayload;
  try {
    payload = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as ContinuationPayload;
  } catch {
    throw invalid("its payload is not JSON");
  }
  if (payload?.v !== VERSION) throw invalid(`unknown continuation version ${String(payload?.v)}`);
  payload.args = (payload.args as unknown[]).map(wireOf);
  payload.log = payload.log.map((entry) => ({
    ...entry,
    args: wireOf(entry.args),
    ...(entry.result === undefined ? {} : { result: { ...entry.result, wire: wireOf(entry.result.wire) } }),
  }));
  if (typeof payload.expiresAt !== "number" || now > payload.expiresAt) {
    throw invalid(`it expired at ${new Date(payload.expiresAt).toISOString()}`);
  }
  if (payload.module !== module.displayPath || payload.moduleHash !== module.hash) {
    throw invalid(
      payload.module !== module.displayPath
        ? `it was made by a run of ${payload.module}, not ${module.displayPath}`
        : `${module.displayPath} changed since the run paused (its source differs)`,
    );
  }
  if (payload.session !== module.session) {
    throw invalid(
      "it was made in another session (another MossContext): a paused run resumes only in the session it was made for",
    );
  }
  return payload;
}

/** Signatures of continuations this process resumed (bounded: the oldest are forgotten first). */
const resumed = new Set<string>();
const MAX_REMEMBERED = 10_000;

/**
 * Marks a verified continuation as resumed: a second resume of it in this process is refused, so a double submit
 * cannot run its approved calls twice. (Across processes the host keeps a continuation until it resumes it.)
 */
export function claimContinuation(text: string): void {
  const signature = text.slice(text.lastIndexOf(".") + 1);
  if (resumed.has(signature)) {
    throw new MossError(
      "continuation-invalid",
      "the continuation cannot be resumed: it was already resumed in this process (a run that paused again returned a new continuation: resume that one)",
      {},
    );
  }
  resumed.add(signature);
  if (resumed.size > MAX_REMEMBERED) resumed.delete(resumed.values().next().value as string);
}

function mac(body: string, key: Uint8Array): string {
  return createHmac("sha256", key).update(`moss1.${body}`).digest("base64url");
}
