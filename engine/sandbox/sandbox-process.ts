import { Socket } from "node:net";
import { type HostOperation, type IsolateSession, memoryLimitMebibytes } from "./isolate-session.ts";
import { type ChildMessage, LineChannel, type ParentMessage } from "./line-channel.ts";
import type { HostOutcome } from "./sandbox.ts";
import { WarmIsolates } from "./warm-isolates.ts";

/*
 * Entry of a sandbox process (started by the process driver with --no-node-snapshot --no-harmony-rab-gsab).
 * It holds the isolates of many sessions; every host call goes to the parent over the fd-3 pipe and the isolate
 * waits for the answer through applySyncPromise. Model code never runs on this thread.
 */

const warm = new WarmIsolates("sync-promise");
const sessions = new Map<number, IsolateSession>();
const calls = new Map<number, (outcome: HostOutcome) => void>();
const promises = new Map<number, (settled: { kind: "value" | "error"; wire: string }) => void>();
let nextCall = 1;

const socket = new Socket({ fd: 3, readable: true, writable: true });
const channel = new LineChannel<ParentMessage, ChildMessage>(socket, handle);

function handle(message: ParentMessage): void {
  switch (message.type) {
    case "reply": {
      const resolve = calls.get(message.call);
      calls.delete(message.call);
      const outcome = message.outcome;
      if (outcome.kind === "promise") {
        // Registered before any later line is handled, so a settle right behind this reply finds its entry.
        const settled = new Promise<{ kind: "value" | "error"; wire: string }>((done) =>
          promises.set(outcome.promiseId, done),
        );
        resolve?.({ kind: "promise", settled });
      } else {
        resolve?.(outcome);
      }
      return;
    }
    case "settle": {
      const resolve = promises.get(message.promiseId);
      promises.delete(message.promiseId);
      resolve?.({ kind: message.kind, wire: message.wire });
      return;
    }
    case "open":
      void open(message.session, message);
      return;
    case "run":
      void run(message.session, message.request);
      return;
    case "dispose":
      sessions.get(message.session)?.dispose();
      sessions.delete(message.session);
      return;
  }
}

async function open(id: number, message: Extract<ParentMessage, { type: "open" }>): Promise<void> {
  try {
    const session = await warm.take(memoryLimitMebibytes(message.memoryLimitBytes));
    await session.install(message.setup, {
      call: (operation: HostOperation, handle: number, member: string | null, args: string) =>
        new Promise<HostOutcome>((resolve) => {
          const call = nextCall++;
          calls.set(call, resolve);
          channel.send({ type: "call", session: id, call, operation, handle, member, args });
        }),
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
      result: {
        ok: false,
        stdout: "",
        warnings: [],
        hostCalls: 0,
        cpuTimeMs: 0,
        error: { kind: "crash", name: "SandboxError", message: "unknown sandbox session" },
      },
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
