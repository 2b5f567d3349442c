// The frames the CLI's client and a warm process of the daemon exchange over one Unix socket (daemon-client.ts,
// daemon-child.ts): a kind byte, the payload's length (4 bytes, big-endian) and the payload. Light on purpose: the
// client imports this before anything else, on every command.

/** What the client sends: the request's header (JSON), bytes of its stdin, stdin's end, a signal it received. */
export const TO_CHILD = { header: 0x48, stdin: 0x49, stdinEnd: 0x45, signal: 0x53 } as const;
/** What the warm process sends: stdout and stderr bytes, its exit code, a wish to read stdin, raw mode on or off. */
export const TO_CLIENT = { stdout: 0x4f, stderr: 0x58, exit: 0x51, wantStdin: 0x57, rawMode: 0x4d } as const;

/** The request a client sends first: everything of its process a command may read at start. */
export interface DaemonRequest {
  /** The command line after `moss`. */
  argv: string[];
  /** The script the user started (`process.argv[1]`). */
  script: string;
  cwd: string;
  env: Record<string, string>;
  umask: number;
  /** Each standard stream's terminal facts: whether a TTY, its size and colour depth. */
  stdin: { isTTY: boolean };
  stdout: TerminalFacts;
  stderr: TerminalFacts;
}

/** What a command may read of an output stream that is a terminal. */
export interface TerminalFacts {
  isTTY: boolean;
  columns?: number;
  rows?: number;
  colorDepth?: number;
}

/** One frame as bytes. */
export function frame(kind: number, payload: Uint8Array | string = new Uint8Array(0)): Buffer {
  const body = typeof payload === "string" ? Buffer.from(payload, "utf8") : payload;
  const head = Buffer.alloc(5);
  head[0] = kind;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}

/** Cuts a byte stream into frames: `push` each chunk as it arrives, get back the frames it completed. */
export class FrameReader {
  #pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Array<{ kind: number; payload: Buffer }> {
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    const frames: Array<{ kind: number; payload: Buffer }> = [];
    while (this.#pending.length >= 5) {
      const length = this.#pending.readUInt32BE(1);
      if (this.#pending.length < 5 + length) break;
      frames.push({ kind: this.#pending[0]!, payload: this.#pending.subarray(5, 5 + length) });
      this.#pending = this.#pending.subarray(5 + length);
    }
    return frames;
  }
}
