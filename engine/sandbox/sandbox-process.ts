import { readSync, writeSync } from "node:fs";
import { Socket } from "node:net";
import {
  batchedCallOf,
  type CallReply,
  type HostCall,
  type HostOutcome,
  type SettledOutcome,
} from "../membrane/index.ts";
import { crashResult } from "./crash-result.ts";
import { eventLoopAwake, spinPays } from "./event-loop-awake.ts";
import { type IsolateSession, memoryLimitMebibytes } from "./isolate-session.ts";
import {
  type ChildMessage,
  type HostCallBatch,
  LineChannel,
  type ParentMessage,
  type SessionCall,
} from "./line-channel.ts";
import { WarmIsolates } from "./warm-isolates.ts";

/*
 * Entry of a sandbox process (started by the process driver with --no-node-snapshot, plus --no-harmony-rab-gsab on
 * the Node lines that accept it). It holds the isolates of the sessions the driver placed here (and one primed
 * spare isolate), each in its own context, and runs one of them at a time on its own thread. Control messages travel as JSON lines
 * on fd 3; a host call is a synchronous request/reply on fd 4 (the isolate waits; only one call is ever in
 * flight), and results of host promises come back later on fd 3 as `settle` messages.
 */

const CALL_FD = 4;

/** How long this process polls for a reply (on the call pipe, and its event loop for settlements): the driver's. */
const spinMicroseconds = Number(process.argv[2] ?? 0) || 0;

/**
 * Switches the call pipe between non-blocking (polled while a reply is expected soon) and blocking (a sleep until
 * it comes). Node offers no fcntl: a libuv handle of the pipe that never reads (the replies are read here,
 * synchronously) makes the descriptor non-blocking when it opens, and its `setBlocking` switches it.
 */
const callPipe = spinMicroseconds > 0 ? callPipeSwitch() : undefined;

function callPipeSwitch(): (blocking: boolean) => void {
  const pipe = new Socket({ fd: CALL_FD, readable: false, writable: false });
  const handle = (pipe as unknown as { _handle?: { setBlocking?(blocking: boolean): number } })._handle;
  if (typeof handle?.setBlocking !== "function") {
    // The pipe stays non-blocking: past the spin, each read that finds nothing sleeps 50 µs instead of polling.
    const cell = new Int32Array(new SharedArrayBuffer(4));
    return (blocking) => {
      if (blocking) Atomics.wait(cell, 0, 0, 0.05);
    };
  }
  let blocking = false;
  return (wanted) => {
    if (wanted === blocking) return;
    handle.setBlocking!(wanted);
    blocking = wanted;
  };
}

const warm = new WarmIsolates("caller-thread");
const sessions = new Map<number, IsolateSession>();
const promises = new Map<number, (settled: SettledOutcome) => void>();
const replyBuffer = Buffer.allocUnsafe(64 * 1024);

const socket = new Socket({ fd: 3, readable: true, writable: true });
const channel = new LineChannel<ParentMessage, ChildMessage>(socket, handle, { frames: true });

function handle(message: ParentMessage): void {
  switch (message.type) {
    case "settle": {
      // The run goes on from here: the settlement of its next host promise is likely close behind.
      eventLoopAwake.awake(spinMicroseconds);
      const resolve = promises.get(message.promiseId);
      promises.delete(message.promiseId);
      resolve?.(
        message.kind === "pending" ? { kind: "pending" } : { kind: message.kind, wire: message.wire },
      );
      return;
    }
    case "open":
      void open(message.session, message.setup, message.memoryLimitBytes);
      return;
    case "run":
      void run(message.session, message.request);
      return;
    case "stop":
      sessions.get(message.session)?.stop(message.message);
      return;
    case "dispose":
      sessions.get(message.session)?.dispose();
      sessions.delete(message.session);
      return;
  }
}

/** Sends one host call to the parent and blocks until its reply line arrives. */
function callParent(session: number, call: HostCall): HostOutcome {
  const { operation, handle, member, args, line, nondeterminism } = call;
  const message: SessionCall = {
    session,
    operation,
    handle,
    member,
    args,
    line,
    ...(nondeterminism ? { nondeterminism } : {}),
  };
  return outcomeOf(exchange(message) as CallReply);
}

/** Sends a batch of host calls to the parent in one line and blocks until the line of their replies arrives. */
function callParentBatch(session: number, calls: HostCall[]): HostOutcome[] {
  const batch: HostCallBatch = { session, batch: calls.map(batchedCallOf) };
  const replies = exchange(batch);
  return Array.isArray(replies) ? replies.map((reply: CallReply) => outcomeOf(reply)) : [];
}

/**
 * Writes one line on the call pipe and reads the parent's reply line: polled for `spinMicroseconds` (a reply
 * usually comes within them, and a sleeping thread takes tens of µs to wake), then waited for blocking.
 */
function exchange(message: object): unknown {
  writeAll(`${JSON.stringify(message)}\n`);
  eventLoopAwake.awake(spinMicroseconds);
  const spin = callPipe !== undefined && spinPays();
  callPipe?.(!spin);
  const spinUntil = spin ? performance.now() + spinMicroseconds / 1000 : 0;
  const chunks: Buffer[] = [];
  for (;;) {
    let count: number;
    try {
      count = readSync(CALL_FD, replyBuffer, 0, replyBuffer.length, null);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error;
      if (performance.now() >= spinUntil) callPipe?.(true);
      continue;
    }
    if (count === 0) process.exit(1);
    chunks.push(Buffer.from(replyBuffer.subarray(0, count)));
    if (replyBuffer[count - 1] === 0x0a) break;
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function outcomeOf(reply: CallReply): HostOutcome {
  if (reply.kind !== "promise") return reply;
  // Registered before this thread returns to its event loop, where the matching settle is read.
  const settled = new Promise<SettledOutcome>((resolve) => promises.set(reply.promiseId, resolve));
  return { kind: "promise", settled };
}

function writeAll(text: string): void {
  const bytes = Buffer.from(text);
  let offset = 0;
  while (offset < bytes.length) {
    try {
      offset += writeSync(CALL_FD, bytes, offset);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error;
      // The parent has not read the line so far yet: wait for room instead of polling.
      callPipe?.(true);
    }
  }
}

async function open(
  id: number,
  setup: Extract<ParentMessage, { type: "open" }>["setup"],
  memoryLimitBytes: number,
): Promise<void> {
  try {
    // The process holds several sessions: taking the warm isolate warms its successor for the next one.
    const session = await warm.take(memoryLimitMebibytes(memoryLimitBytes));
    await session.install(setup, {
      call: (call) => callParent(id, call),
      callBatch: (calls) => callParentBatch(id, calls),
    });
    sessions.set(id, session);
    channel.send({ type: "opened", session: id });
  } catch (error) {
    channel.send({ type: "open-failed", session: id, message: (error as Error)?.message ?? String(error) });
  }
}

async function run(id: number, request: Extract<ParentMessage, { type: "run" }>["request"]): Promise<void> {
  const session = sessions.get(id);
  if (session === undefined) {
    channel.send({
      type: "result",
      session: id,
      alive: false,
      result: crashResult("unknown sandbox session"),
    });
    return;
  }
  const result = await session.run(request);
  if (!session.alive) sessions.delete(id);
  channel.send({ type: "result", session: id, result, alive: session.alive });
}

function shutdown(): void {
  for (const session of sessions.values()) session.dispose();
  void warm.close().finally(() => process.exit(0));
}

socket.on("end", shutdown);
socket.on("error", shutdown);

warm.prime().then(
  () => channel.send({ type: "ready" }),
  (error: unknown) => {
    process.stderr.write(`sandbox process failed to start: ${(error as Error)?.message ?? error}\n`);
    process.exit(1);
  },
);
