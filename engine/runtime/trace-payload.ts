import { decodeWire } from "../membrane/index.ts";
import type { HostCallRecord, TracePayloads } from "../types.ts";

/*
 * The payloads of the call trace (`HostCallRecord.args`, `result`, `error`), kept only when the runtime is asked to
 * (`tracePayloads`): each is a readable JSON rendering of the wire text, passed through the host's redactor (when it
 * gave one) and cut to TRACE_PAYLOAD_CHARS with a marker naming the whole text's size. An execution keeps at most
 * TRACE_PAYLOAD_BUDGET characters of them; later calls keep their sizes only. What it costs is bounded per execution
 * too: at most RENDER_BUDGET characters of wire are decoded, the rest is shown as wire text.
 */

/** Most characters of one payload kept in the trace (before the truncation marker). */
export const TRACE_PAYLOAD_CHARS = 1024;

/**
 * Characters past the cut the redactor also reads, so that a secret written across the cut is found whole and never
 * shown in part (the text kept then ends before them). A secret whose written form (an escape, base64) is longer
 * than this could show its first characters when a payload is cut inside it.
 */
const REDACT_LOOKAHEAD = TRACE_PAYLOAD_CHARS;

/** Most characters of payloads one execution's trace keeps; later calls keep their sizes only. */
export const TRACE_PAYLOAD_BUDGET = 256 * 1024;

/**
 * Wire texts up to this size are decoded into a readable rendering, as long as the execution has decoded less than
 * RENDER_BUDGET of them; others are kept as their wire text (cut), which costs nothing more: decoding is what a
 * payload costs (about 2 ms for 64 KiB of wire, 30 ms for 280 KiB), and it runs on the host for each call.
 */
const MAX_RENDERED_WIRE = 64 * 1024;
const RENDER_BUDGET = 2 * 1024 * 1024;

/** What a cut payload ends with: `… (truncated, 12345 bytes)`, the size of the whole text. */
export function truncationMarker(size: number): string {
  return `… (truncated, ${size} bytes)`;
}

/** The payloads a run log keeps: the renderer of its host objects, the host's redactor and the execution's budget. */
export class TracePayloadRecorder {
  readonly #redact: ((text: string) => string) | undefined;
  readonly #describe: (handle: number) => string;
  #left = TRACE_PAYLOAD_BUDGET;
  #renderLeft = RENDER_BUDGET;

  constructor(options: Exclude<TracePayloads, false>, describe: (handle: number) => string) {
    this.#redact = options === true ? undefined : options.redact;
    this.#describe = describe;
  }

  /** Sets `trace.args` from the call's wire arguments (an array of the arguments). */
  args(trace: HostCallRecord, wire: string): void {
    const text = this.#bounded(wire);
    if (text !== undefined) trace.args = text;
  }

  /** Sets `trace.result` (a value) or `trace.error` (a thrown or rejected error, a denial) from the result's wire. */
  result(trace: HostCallRecord, kind: "value" | "error", wire: string): void {
    if (kind === "value") {
      const text = this.#bounded(wire);
      if (text !== undefined) trace.result = text;
      return;
    }
    const text = this.#bounded(wire, true);
    if (text !== undefined) trace.error = text;
  }

  /** A payload as kept, or undefined once the execution's budget is spent. */
  #bounded(wire: string, asError = false): string | undefined {
    if (this.#left <= 0) return undefined;
    const text = boundPayload(this.#render(wire, asError), this.#redact);
    this.#left -= text.length;
    return text;
  }

  /**
   * A readable rendering: JSON of the decoded value (host objects as what they denote, in brackets), an error as
   * `Name: message`; the wire text itself when it is long, cyclic or does not decode.
   */
  #render(wire: string, asError: boolean): string {
    if (wire.length > MAX_RENDERED_WIRE || wire.length > this.#renderLeft) return wire;
    this.#renderLeft -= wire.length;
    let value: unknown;
    try {
      value = decodeWire(wire, {
        maxExpandedBytes: MAX_RENDERED_WIRE,
        onHandle: (shape) => `[${this.#describe(shape.id)}]`,
      });
    } catch {
      return wire;
    }
    // A host error crosses as its fields (`hostErrorFields`: name, message, code); model code may throw an Error.
    if (asError && (value instanceof Error || isErrorFields(value))) return errorText(value);
    try {
      return JSON.stringify(value, readableJson) ?? "undefined";
    } catch {
      return wire;
    }
  }
}

/**
 * `text` redacted and cut to {@link TRACE_PAYLOAD_CHARS} with {@link truncationMarker}. The redactor reads the text
 * up to {@link REDACT_LOOKAHEAD} characters past the cut; when the text goes on beyond those, the redacted text
 * loses as many characters from its end (where a secret cut in two would be) before it is cut.
 */
export function boundPayload(text: string, redact?: (text: string) => string): string {
  const window = TRACE_PAYLOAD_CHARS + REDACT_LOOKAHEAD;
  if (text.length <= window) {
    const shown = redact === undefined ? text : redact(text);
    return shown.length <= TRACE_PAYLOAD_CHARS
      ? shown
      : `${cutAt(shown, TRACE_PAYLOAD_CHARS)}${truncationMarker(text.length)}`;
  }
  const shown = redact === undefined ? text.slice(0, window) : redact(text.slice(0, window));
  const kept = Math.max(0, Math.min(TRACE_PAYLOAD_CHARS, shown.length - REDACT_LOOKAHEAD));
  return `${cutAt(shown, kept)}${truncationMarker(text.length)}`;
}

/** The first `length` characters of `text`, one less when the cut would split a surrogate pair. */
function cutAt(text: string, length: number): string {
  const code = text.charCodeAt(length - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? length - 1 : length);
}

function isErrorFields(value: unknown): value is { name: string; message: string } {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { name?: unknown }).name === "string" &&
    typeof (value as { message?: unknown }).message === "string"
  );
}

function errorText(error: { name: string; message: string }): string {
  const code = (error as { code?: unknown }).code;
  return `${error.name}: ${error.message}${typeof code === "string" ? ` (${code})` : ""}`;
}

/** JSON.stringify's replacer for what the wire carries that JSON does not. */
function readableJson(_key: string, value: unknown): unknown {
  if (value === undefined) return "undefined";
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  if (value instanceof Error) return errorText(value);
  if (value instanceof Map) return { Map: [...value.entries()] };
  if (value instanceof Set) return { Set: [...value.values()] };
  if (value instanceof RegExp) return String(value);
  if (ArrayBuffer.isView(value)) return `${value.constructor.name}(${value.byteLength} bytes)`;
  if (value instanceof ArrayBuffer) return `ArrayBuffer(${value.byteLength} bytes)`;
  return value;
}
