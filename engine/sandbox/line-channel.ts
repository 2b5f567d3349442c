import type { Duplex } from "node:stream";
import type { BatchedCall, HostOperation } from "../membrane/index.ts";
import type { SandboxRunRequest, SandboxRunResult, SessionSetup } from "./sandbox.ts";

/*
 * The parent <-> sandbox-process protocol: one JSON message per line. JSON escapes newlines, so a line is always
 * one whole message; wire payloads travel as JSON strings inside it. Control messages use fd 3; host calls use
 * fd 4, where the sandbox process writes a `HostCall` line and blocks reading its `CallReply` line.
 */

/** A host call from an isolate, as the sandbox process writes it on the call pipe. */
export interface HostCall {
  session: number;
  operation: HostOperation;
  handle: number;
  member: string | null;
  args: string;
  /** The script line that made the call (0: unknown). */
  line: number;
  /** The clock and random values the run read since its previous host call (JSON); absent when none. */
  nondeterminism?: string;
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
  | { type: "settle"; promiseId: number; kind: "value" | "error"; wire: string }
  | { type: "settle"; promiseId: number; kind: "pending" };

/** Messages a sandbox process sends to the parent. */
export type ChildMessage =
  | { type: "ready" }
  | { type: "opened"; session: number }
  | { type: "open-failed"; session: number; message: string }
  | { type: "result"; session: number; result: SandboxRunResult; alive: boolean }
  | {
      type: "call";
      session: number;
      call: number;
      operation: HostOperation;
      handle: number;
      member: string | null;
      args: string;
    };

/** Newline-delimited JSON messages over a duplex stream. */
export class LineChannel<Incoming, Outgoing> {
  readonly #stream: Duplex;
  #buffer = "";

  constructor(stream: Duplex, onMessage: (message: Incoming) => void) {
    this.#stream = stream;
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      let start = 0;
      let end = chunk.indexOf("\n");
      if (end === -1) {
        this.#buffer += chunk;
        return;
      }
      let line = this.#buffer + chunk.slice(0, end);
      this.#buffer = "";
      for (;;) {
        onMessage(JSON.parse(line) as Incoming);
        start = end + 1;
        end = chunk.indexOf("\n", start);
        if (end === -1) break;
        line = chunk.slice(start, end);
      }
      this.#buffer = chunk.slice(start);
    });
  }

  send(message: Outgoing): void {
    this.#stream.write(`${JSON.stringify(message)}\n`);
  }

  end(): void {
    this.#stream.end();
  }
}
