import { afterEach, describe, expect, test } from "vitest";
import { decodeWire, encodeWire, type HandleShape, type HostOutcome } from "../../engine/membrane/index.ts";
import {
  type ExecutionThread,
  IsolateSession,
  type SessionHost,
} from "../../engine/sandbox/isolate-session.ts";
import { DEFAULT_LIMITS, type ExecutionLimits } from "../../engine/types.ts";

/*
 * Issue 17: the calls of methods declared to return a Promise (`asyncMethods` of a handle's shape) that model code
 * makes in one microtask turn cross to the host together, before any other call, and each is answered as if it
 * were made alone. Checked on the isolate session itself, on both threads the drivers run it on, with a host that
 * records each exchange.
 */

type Exchange = { batch: string[] } | { call: string };

/** A host with one service: `record` and `fail` are declared async, `mark` is not. */
function recordingHost(): { host: SessionHost; exchanges: Exchange[]; events: string[] } {
  const exchanges: Exchange[] = [];
  const events: string[] = [];
  const answer = (member: string | null, args: string): HostOutcome => {
    const text = String((decodeWire(args) as unknown[])[0]);
    events.push(`${member} ${text}`);
    if (member === "fail")
      return { kind: "error", wire: encodeWire({ name: "Error", message: `no ${text}` }) };
    if (member === "mark") return { kind: "value", wire: encodeWire(events.length) };
    return {
      kind: "promise",
      settled: Promise.resolve({ kind: "value" as const, wire: encodeWire(events.length) }),
    };
  };
  const host: SessionHost = {
    call: ({ member, args }) => {
      exchanges.push({ call: String(member) });
      return answer(member, args);
    },
    callBatch: (calls) => {
      exchanges.push({ batch: calls.map((call) => String(call.member)) });
      const outcomes: HostOutcome[] = [];
      for (const { member, args } of calls) outcomes.push(answer(member, args));
      return outcomes;
    },
  };
  return { host, exchanges, events };
}

const service = {
  id: 1,
  kind: "object",
  methods: ["record", "fail", "mark"],
  properties: [],
  asyncMethods: ["record", "fail"],
};

const sessions: IsolateSession[] = [];
afterEach(() => {
  for (const session of sessions.splice(0)) session.dispose();
});

async function open(thread: ExecutionThread, host: SessionHost): Promise<IsolateSession> {
  const session = await IsolateSession.create({ memoryLimitBytes: 64 * 1024 * 1024, thread });
  sessions.push(session);
  await session.install(
    {
      globals: encodeWire({}),
      mossData: encodeWire({}),
      mossServices: encodeWire(
        { shop: new (class Shop {})() },
        { onHostObject: () => service as HandleShape },
      ),
      dataFields: [],
    },
    host,
  );
  return session;
}

function run(session: IsolateSession, body: string, limits: Partial<ExecutionLimits> = {}) {
  return session.run({
    script: `async function main(moss) {\n${body}\n}`,
    filename: "snippet.js",
    target: "main",
    args: [{ local: "moss" }],
    limits: { ...DEFAULT_LIMITS, ...limits },
  });
}

describe.each(["isolate-thread", "caller-thread"] as const)("host call batches (%s)", (thread) => {
  test("the async calls of one turn cross once, in program order, before the next sync call", async () => {
    const { host, exchanges, events } = recordingHost();
    const session = await open(thread, host);
    const result = await run(
      session,
      `const a = moss.shop.record("a");
const b = moss.shop.record("b");
const m = moss.shop.mark("m");
const c = moss.shop.record("c");
return [await a, await b, m, await c];`,
    );
    expect(result.error).toBeUndefined();
    expect(JSON.parse(result.returns!)).toEqual([["A", 1, 2, 3, 4], 1, 2, 3, 4]);
    expect(events).toEqual(["record a", "record b", "mark m", "record c"]);
    expect(exchanges).toEqual([{ batch: ["record", "record"] }, { call: "mark" }, { batch: ["record"] }]);
    expect(result.hostCalls).toBe(4);
  });

  test("a long batch crosses in parts of at most 256 calls, still in order", async () => {
    const { host, exchanges, events } = recordingHost();
    const session = await open(thread, host);
    const result = await run(
      session,
      `const all = [];
for (let i = 0; i < 300; i++) all.push(moss.shop.record(String(i)));
return (await Promise.all(all)).length;`,
    );
    expect(result.error).toBeUndefined();
    expect(exchanges.map((exchange) => ("batch" in exchange ? exchange.batch.length : 0))).toEqual([256, 44]);
    expect(events).toEqual(Array.from({ length: 300 }, (_, index) => `record ${index}`));
  });

  test("a call that fails in the middle of a batch rejects only its own promise, with the host's message", async () => {
    const { host, exchanges, events } = recordingHost();
    const session = await open(thread, host);
    const result = await run(
      session,
      `const settled = await Promise.allSettled([moss.shop.record("a"), moss.shop.fail("b"), moss.shop.record("c")]);
let caught = "";
try { await moss.shop.fail("d"); } catch (error) { caught = error.message + " @" + error.stack.includes("snippet.js:4"); }
return settled.map((entry) => entry.status === "fulfilled" ? entry.value : entry.reason.message).concat(caught);`,
    );
    expect(result.error).toBeUndefined();
    expect(JSON.parse(result.returns!).slice(1)).toEqual([1, "no b", 3, "no d @true"]);
    expect(events).toEqual(["record a", "fail b", "record c", "fail d"]);
    expect(exchanges).toEqual([{ batch: ["record", "fail", "record"] }, { batch: ["fail"] }]);
  });

  test("a batch that crosses the call limit: the calls past it never reach the host and fail with the limit", async () => {
    const { host, events } = recordingHost();
    const session = await open(thread, host);
    const result = await run(
      session,
      `const settled = await Promise.allSettled([1, 2, 3, 4].map((n) => moss.shop.record(String(n))));
return settled.map((entry) => entry.status);`,
      { maxHostCalls: 2 },
    );
    expect(events).toEqual(["record 1", "record 2"]);
    expect(result.ok).toBe(false);
    expect(result.error).toMatchObject({
      kind: "call-limit",
      message: "the run exceeded its limit of 2 host calls",
    });
    expect(result.hostCalls).toBe(2);
  });

  test("a call model code makes after a batch's limit fails at once, as after any call past the limit", async () => {
    const { host, events } = recordingHost();
    const session = await open(thread, host);
    const result = await run(
      session,
      `await Promise.allSettled([moss.shop.record("1"), moss.shop.record("2")]);
try { moss.shop.mark("3"); } catch (error) { return "caught " + error.message; }
return "not caught";`,
      { maxHostCalls: 1 },
    );
    expect(events).toEqual(["record 1"]);
    expect(result.error?.kind).toBe("call-limit");
  });
});
