import type { Duplex } from "node:stream";
import type { BatchedCall, HostCall } from "../membrane/index.ts";
import type { SandboxRunRequest, SandboxRunResult, SessionSetup } from "./sandbox.ts";

/*
 * The parent <-> sandbox-process protocol: one JSON message per line. JSON escapes newlines, so a line is always
 * one whole message; wire payloads travel as JSON strings inside it, except on the control channel, where a long
 * one follows its message's line as a raw frame (`LineChannel`'s `frames`). Control messages use fd 3; host calls use
 * fd 4, where the sandbox process writes a `SessionCall` line and blocks reading its `CallReply` line.
 */

/**
 * A host call from an isolate, as the sandbox process writes it on the call pipe: the session's id, then the call's
 * fields (`nondeterminism` absent when none).
 */
export interface SessionCall extends HostCall {
  session: number;
}

/** The calls of one batch (`HostBatchBridge`) as the sandbox process writes them; the reply is one array line. */
export interface HostCallBatch {
  session: number;
  batch: BatchedCall[];
}

export type { CallReply } from "../membrane/index.ts";

/** Messages the parent sends to a sandbox process. */
export type ParentMessage =
  | { type: "open"; session: number; setup: SessionSetup; memoryLimitBytes: number }
  | { type: "run"; session: number; request: SandboxRunRequest }
  | { type: "dispose"; session: number }
  | { type: "stop"; session: number; message: string }
  | { type: "settle"; promiseId: number; kind: "value" | "error"; wire: string }
  | { type: "settle"; promiseId: number; kind: "pending" };

/** Messages a sandbox process sends to the parent. */
export type ChildMessage =
  | { type: "ready" }
  | { type: "opened"; session: number }
  | { type: "open-failed"; session: number; message: string }
  | { type: "result"; session: number; result: SandboxRunResult; alive: boolean };

/**
 * A string at least this long in a message on a channel with frames travels as a raw frame after the message's line
 * (its wire text is not escaped into the line and parsed out of it again).
 */
export const FRAME_MIN_CHARS = 16 * 1024;
/** Most characters the frames of one message may announce. */
const MAX_FRAME_CHARS = 2 ** 29;
/** Key of the placeholder that stands for a frame in the line: `{ "\u0000frame": index }`. */
const FRAME_KEY = "\u0000frame";

/** Options of a `LineChannel`. */
export interface LineChannelOptions {
  /** Send long strings as raw frames (both ends must be channels made with this option; any end reads them). */
  frames?: boolean;
  /** A message that is not valid: its line is not JSON, or its frames are malformed. Without it, it throws. */
  onInvalid?: (error: Error) => void;
}

/**
 * Newline-delimited JSON messages over a duplex stream. With `frames`, a message holding long, well-formed strings
 * is sent as the line `#` + `{"message": …, "frames": [length…]}` with a placeholder for each such string, followed
 * by the strings themselves, raw and back to back (lengths in UTF-16 code units: a well-formed string keeps its
 * length through UTF-8).
 */
export class LineChannel<Incoming, Outgoing> {
  readonly #stream: Duplex;
  readonly #frames: boolean;
  readonly #onMessage: (message: Incoming) => void;
  readonly #onInvalid: ((error: Error) => void) | undefined;
  #buffer = "";
  /** The line of a message whose frames are still arriving, and the frames' characters so far. */
  #pending:
    | { header: string; lengths: number[]; total: number; parts: string[]; received: number }
    | undefined;
  #invalid = false;

  constructor(stream: Duplex, onMessage: (message: Incoming) => void, options: LineChannelOptions = {}) {
    this.#stream = stream;
    this.#frames = options.frames === true;
    this.#onMessage = onMessage;
    this.#onInvalid = options.onInvalid;
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => this.#receive(chunk));
  }

  #receive(chunk: string): void {
    if (this.#invalid) return;
    let start = 0;
    while (start < chunk.length) {
      const pending = this.#pending;
      if (pending !== undefined) {
        const take = Math.min(pending.total - pending.received, chunk.length - start);
        pending.parts.push(chunk.slice(start, start + take));
        pending.received += take;
        start += take;
        if (pending.received === pending.total) {
          this.#pending = undefined;
          if (!this.#deliver(() => framedMessage(pending.header, pending.lengths, pending.parts.join(""))))
            return;
        }
        continue;
      }
      const end = chunk.indexOf("\n", start);
      if (end === -1) {
        this.#buffer += chunk.slice(start);
        return;
      }
      const line = this.#buffer + chunk.slice(start, end);
      this.#buffer = "";
      start = end + 1;
      if (line.startsWith("#")) {
        let lengths: number[];
        try {
          lengths = frameLengths(line);
        } catch (error) {
          this.#fail(error as Error);
          return;
        }
        const total = lengths.reduce((sum, length) => sum + length, 0);
        if (total > 0) this.#pending = { header: line, lengths, total, parts: [], received: 0 };
        else if (!this.#deliver(() => framedMessage(line, lengths, ""))) return;
        continue;
      }
      if (!this.#deliver(() => JSON.parse(line) as Incoming)) return;
    }
  }

  /** Parses a message and passes it on; false when it was not valid (the channel then takes nothing more). */
  #deliver(parse: () => unknown): boolean {
    let message: Incoming;
    try {
      message = parse() as Incoming;
    } catch (error) {
      this.#fail(error as Error);
      return false;
    }
    this.#onMessage(message);
    return true;
  }

  #fail(error: Error): void {
    this.#invalid = true;
    const invalid = new Error(`a message on the channel is not valid: ${error.message}`, { cause: error });
    if (this.#onInvalid === undefined) throw invalid;
    this.#onInvalid(invalid);
  }

  send(message: Outgoing): void {
    if (!this.#frames) {
      this.#stream.write(`${JSON.stringify(message)}\n`);
      return;
    }
    const frames: string[] = [];
    const line = JSON.stringify(message, (_key, value: unknown) => {
      if (typeof value !== "string" || value.length < FRAME_MIN_CHARS || !isWellFormed(value)) return value;
      frames.push(value);
      return { [FRAME_KEY]: frames.length - 1 };
    });
    if (frames.length === 0) {
      this.#stream.write(`${line}\n`);
      return;
    }
    const header = `#{"message":${line},"frames":[${frames.map((frame) => frame.length).join(",")}]}\n`;
    this.#stream.write(header);
    for (const frame of frames) this.#stream.write(frame);
  }

  end(): void {
    this.#stream.end();
  }
}

/** Whether a string has no lone surrogate (UTF-8 would change one, but keeps the length of a well-formed string). */
const isWellFormed = (text: string): boolean =>
  (text as unknown as { isWellFormed(): boolean }).isWellFormed();

/** The frame lengths a `#` line announces (checked: whole numbers, within MAX_FRAME_CHARS together). */
function frameLengths(line: string): number[] {
  const header = JSON.parse(line.slice(1)) as { frames?: unknown };
  const lengths = header?.frames;
  if (!Array.isArray(lengths)) throw new TypeError("a framed message without its frame lengths");
  let total = 0;
  for (const length of lengths) {
    if (!Number.isSafeInteger(length) || (length as number) < 0)
      throw new TypeError("a frame length is not a count");
    total += length as number;
  }
  if (total > MAX_FRAME_CHARS)
    throw new TypeError(`its frames announce more than ${MAX_FRAME_CHARS} characters`);
  return lengths as number[];
}

/** The message of a `#` line with each placeholder replaced by its frame, cut from `text` by `lengths`. */
function framedMessage(line: string, lengths: number[], text: string): unknown {
  const frames: string[] = [];
  let offset = 0;
  for (const length of lengths) {
    frames.push(text.slice(offset, offset + length));
    offset += length;
  }
  const used = new Uint8Array(frames.length);
  const header = JSON.parse(line.slice(1), (_key, value: unknown) => {
    if (typeof value !== "object" || value === null || !Object.hasOwn(value, FRAME_KEY)) return value;
    const index = (value as Record<string, unknown>)[FRAME_KEY];
    if (Object.keys(value).length !== 1 || !Number.isInteger(index) || used[index as number] !== 0) {
      throw new TypeError("a frame placeholder that names no unused frame");
    }
    used[index as number] = 1;
    return frames[index as number];
  }) as { message?: unknown };
  if (used.includes(0)) throw new TypeError("a frame no placeholder names");
  return header.message;
}
