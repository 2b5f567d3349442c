import type { Duplex } from "node:stream";
import {
  answerInOrder,
  callMembrane,
  checkBatch,
  type HostMembrane,
  type HostOutcome,
  hostErrorWire,
} from "../membrane/index.ts";
import { eventLoopAwake } from "./event-loop-awake.ts";
import {
  type CallReply,
  type HostCallBatch,
  LineChannel,
  type ParentMessage,
  type SessionCall,
} from "./line-channel.ts";

/*
 * This process's end of a sandbox process's call pipe (fd 4): each line is a host call (or a batch) of the session
 * whose run is in flight there, answered by that session's membrane with one reply line while the sandbox process
 * waits for it. A host promise is named by an id in the reply; its settlement goes later on the control pipe.
 */

/** Options of a `CallPipe`. */
export interface CallPipeOptions {
  /** The membrane of the session whose run is in flight, by session id; undefined for any other session. */
  membraneOf(session: number): HostMembrane | undefined;
  /** Sends a host promise's settlement on the control pipe (fd 3). */
  settle(message: Extract<ParentMessage, { type: "settle" }>): void;
  /** Whether the sandbox process has ended (nothing is written then). */
  exited(): boolean;
  /** A line on the pipe that is not a valid message: the sandbox process is killed. */
  onInvalid(error: Error): void;
  spinMicroseconds: number;
}

export class CallPipe {
  readonly #channel: LineChannel<SessionCall | HostCallBatch, CallReply | CallReply[]>;
  readonly #options: CallPipeOptions;
  #nextPromiseId = 1;

  constructor(stream: Duplex, options: CallPipeOptions) {
    this.#options = options;
    this.#channel = new LineChannel<SessionCall | HostCallBatch, CallReply | CallReply[]>(
      stream,
      (call) => ("batch" in call ? this.#answerBatch(call) : this.#answer(call)),
      { onInvalid: options.onInvalid },
    );
  }

  #answer(call: SessionCall): void {
    const membrane = this.#options.membraneOf(call.session);
    const outcome =
      membrane === undefined
        ? { kind: "error" as const, wire: hostErrorWire(new Error("the session is closed")) }
        : callMembrane(membrane, call);
    this.#reply(this.#callReply(outcome));
  }

  /** A batch of calls (`HostBatchBridge`): answered in order as `answerInOrder` says, replied to in one line. */
  #answerBatch(call: HostCallBatch): void {
    const membrane = this.#options.membraneOf(call.session);
    let outcomes: HostOutcome[];
    try {
      if (membrane === undefined) throw new Error("the session is closed");
      outcomes = answerInOrder(checkBatch(call.batch), (batched) => callMembrane(membrane, batched));
    } catch (error) {
      outcomes = [{ kind: "error", wire: hostErrorWire(error) }];
    }
    this.#reply(outcomes.map((outcome) => this.#callReply(outcome)));
  }

  /** A call's outcome as it crosses the pipe: a promise is named by an id, its settlement sent later on fd 3. */
  #callReply(outcome: HostOutcome): CallReply {
    if (outcome.kind !== "promise") return outcome;
    const promiseId = this.#nextPromiseId++;
    const settle = this.#options.settle;
    outcome.settled.then(
      (settled) =>
        settle(
          settled.kind === "pending"
            ? { type: "settle", promiseId, kind: "pending" }
            : { type: "settle", promiseId, kind: settled.kind, wire: settled.wire },
        ),
      (error: unknown) => settle({ type: "settle", promiseId, kind: "error", wire: hostErrorWire(error) }),
    );
    return { kind: "promise", promiseId };
  }

  #reply(reply: CallReply | CallReply[]): void {
    if (this.#options.exited()) return;
    this.#channel.send(reply);
    // The isolate runs on after the reply: its next call (or its result) is likely close behind.
    eventLoopAwake.awake(this.#options.spinMicroseconds);
  }
}
