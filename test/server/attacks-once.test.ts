// Attacks on "a host call runs at most once, whatever fails" (issue 23 §2), on PGlite and on a real PostgreSQL
// (MOSS_TEST_POSTGRES=1): a worker whose lease was taken over, a worker cut off from its database, a run whose outcome
// PostgreSQL refuses, texts PostgreSQL cannot hold, runs taken over again and again, and cancels while a host call is
// out. The bank of test/server/fixtures/once counts every call that really ran; the workers are `moss serve`'s own
// (startMossServer without HTTP), two of them on one database where a test needs two instances.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { LanguageModel, LanguageModelRequest, LanguageModelResponse } from "../../engine/agent/index.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { type MossServer, startMossServer } from "../../engine/server/moss-server.ts";
import type { Run } from "../../engine/server/protocol.ts";
import type { DatabaseLocation } from "../../engine/server/store/database.ts";
import type { ServerStore } from "../../engine/server/store/index.ts";
import { freshPGliteDirectory } from "../helpers/fresh-pglite.ts";
import { createPostgresDatabase } from "../helpers/postgres-database.ts";
import { POSTGRES_TESTS } from "../helpers/postgres-server.ts";
import { type BankCall, bankHost } from "./fixtures/once/context.host.ts";

const MODULE = "test/server/fixtures/once/context.ts";
const TENANT = "acme";
/** Long enough that no lease expires by itself within a test unless the test makes it expire. */
const LONG_LEASE = { leaseMs: 600_000, heartbeatMs: 200_000, pollMs: 600_000 };
/** A lease a takeover test waits out: the other worker's poll finds the run once it expired. */
const SHORT_LEASE = { leaseMs: 1_500, heartbeatMs: 500, pollMs: 200 };

/**
 * A model that answers a task (a key of `script`) with its code (the body of `main`), then, once the code ran, with
 * its final answer.
 */
function taskModel(script: Record<string, { code?: string; final: string }>): LanguageModel {
  const answer = (request: LanguageModelRequest): LanguageModelResponse => {
    const task = [...request.messages].reverse().find((message) => message.role === "user");
    const entry = Object.entries(script).find(([key]) => task?.content.includes(key))?.[1];
    if (entry === undefined)
      throw new Error(`the test model has no answer for ${JSON.stringify(task?.content)}`);
    const ran = request.messages.at(-1)?.role === "tool";
    const base = { inputTokens: 1, outputTokens: 1, cost: 0, model: "task-model" };
    if (entry.code === undefined || ran) {
      return { ...base, content: entry.final, toolCalls: [], finishReason: "stop" };
    }
    return {
      ...base,
      content: "",
      toolCalls: [
        {
          id: `call-${randomUUID()}`,
          name: "moss",
          arguments: JSON.stringify({ code: `async function main(moss: Moss) {\n${entry.code}\n}` }),
        },
      ],
      finishReason: "tool-calls",
    };
  };
  return {
    model: "task-model",
    generate: async (request) => answer(request),
    stream: async (request, onTextDelta) => {
      const response = answer(request);
      if (response.content !== "") onTextDelta(response.content);
      return response;
    },
  };
}

/** A promise and its resolve, for waiting on an event instead of a timer. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

/** Resolves when `signal` aborts; rejects after `ms` saying what did not happen (the test then fails, not hangs). */
function aborted(signal: AbortSignal | undefined, what: string, ms = 20_000): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal === undefined) return reject(new Error(`${what}: the host call had no run signal`));
    if (signal.aborted) return resolve();
    const timer = setTimeout(() => reject(new Error(`${what}: its signal never aborted`)), ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** A TCP proxy in front of PostgreSQL that a test cuts: every connection is closed, and new ones are refused. */
async function startProxy(port: number): Promise<{ port: number; cut(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let cut = false;
  const server: Server = createServer((client) => {
    if (cut) return void client.destroy();
    const upstream = connect(port, "127.0.0.1");
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.pipe(to);
      from.on("error", () => to.destroy());
      from.on("close", () => {
        sockets.delete(from);
        to.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as { port: number }).port,
    cut() {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

type Backend = "PGlite" | "PostgreSQL";
const BACKENDS: Backend[] = POSTGRES_TESTS ? ["PGlite", "PostgreSQL"] : ["PGlite"];

let directory: string;
const servers: MossServer[] = [];
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-once-"));
}, 120_000);
afterAll(async () => {
  await closeSharedSandboxes();
  await rm(directory, { recursive: true, force: true });
});
beforeEach(() => {
  const host = bankHost();
  host.calls = [];
  delete host.onCall;
});
afterEach(async () => {
  // Held calls are let go so their runs can end; every instance of the test is closed.
  const host = bankHost();
  host.onCall = () => {};
  for (const server of servers.splice(0)) await server.close(0).catch(() => {});
  for (const close of closers.splice(0)) await close().catch(() => {});
});

/** A new, empty database of the backend (each test has its own: runs left by one test are no other's). */
async function freshDatabase(backend: Backend): Promise<DatabaseLocation> {
  if (backend === "PGlite")
    return { dataDirectory: await freshPGliteDirectory(join(directory, randomUUID())) };
  const database = await createPostgresDatabase();
  closers.push(database.drop);
  return { url: database.url };
}

/** An instance of `moss serve` (worker only) on `location`. */
async function instance(
  location: DatabaseLocation,
  model: LanguageModel,
  worker: Record<string, number> | false = LONG_LEASE,
): Promise<MossServer> {
  const server = await startMossServer({
    modulePath: MODULE,
    model,
    database: location,
    http: false,
    worker,
    // Far past any wait of a test: a call's signal that aborts was stopped, not ended by the wall-time limit.
    agent: { execute: { timeoutMs: 300_000 } },
    env: { MOSS_CONTINUATION_KEY: "once-test-continuation-key" },
  });
  servers.push(server);
  return server;
}

async function startRun(store: ServerStore, message: string): Promise<Run> {
  const thread = `t-${randomUUID()}`;
  await store.createThread(TENANT, thread);
  return store.createRun(TENANT, thread, message, { maxActiveRuns: 100 });
}

async function runOf(store: ServerStore, run: Run): Promise<Run> {
  return (await store.getRun(TENANT, run.threadId, run.id))!;
}

/** Waits for the run to reach one of `statuses` (a bounded wait on its stored state; it fails naming the state). */
async function settled(
  store: ServerStore,
  run: Run,
  statuses: Run["status"][],
  timeout = 60_000,
): Promise<Run> {
  await expect
    .poll(async () => (await runOf(store, run)).status, { timeout, interval: 50 })
    .toBeOneOf(statuses);
  return runOf(store, run);
}

/** Claims the running `run` for `owner` as a claim after its lease expired does (a new claim: `attempts` + 1). */
async function takeOver(server: MossServer, run: Run, owner: string): Promise<void> {
  const rows = await server.database.query(
    `UPDATE moss_runs SET lease_owner = $2, attempts = attempts + 1,
       lease_expires_at = clock_timestamp() + interval '10 minutes'
     WHERE id = $1 AND status = 'running' RETURNING id`,
    [run.id, owner],
  );
  expect(rows).toHaveLength(1);
}

/** The calls of `member` that really ran on the bank. */
function callsOf(member: BankCall["member"]): BankCall[] {
  return bankHost().calls.filter((call) => call.member === member);
}

/** Resolves with the first bank call; the call is held until the returned `release` is called. */
function holdFirstCall(): { call: Promise<BankCall>; release: () => void } {
  const first = deferred<BankCall>();
  const gate = deferred();
  let held = false;
  bankHost().onCall = async (call) => {
    if (held) return;
    held = true;
    first.resolve(call);
    await gate.promise;
  };
  return { call: first.promise, release: () => gate.resolve() };
}

describe.each(BACKENDS)("a host call runs at most once on %s", (backend) => {
  it("the model's answer with a NUL byte and a lone surrogate is stored and read back exactly, once", async () => {
    const answer = "Paid\u0000 bob \ud800 and \udc00 — ok \uE000 x";
    const model = taskModel({ "Pay bob": { code: "await moss.bank.pay('bob', 5);", final: answer } });
    const server = await instance(await freshDatabase(backend), model);
    const run = await startRun(server.store, "Pay bob 5.");
    const done = await settled(server.store, run, ["completed", "failed"]);
    expect(done).toMatchObject({ status: "completed", answer, attempts: 1 });
    expect(callsOf("pay")).toHaveLength(1);
  }, 120_000);

  it("an approval's arguments with a NUL byte round-trip exactly, and the approved call runs once with them", async () => {
    const to = "bo\u0000b\ud83d";
    const model = taskModel({
      "Send bob": { code: `await moss.bank.send(${JSON.stringify(to)}, 5);`, final: "Sent." },
    });
    const server = await instance(await freshDatabase(backend), model);
    const run = await startRun(server.store, "Send bob 5.");
    await settled(server.store, run, ["pending", "failed", "completed"]);
    const state = await server.store.threadState(TENANT, run.threadId);
    expect(state?.status).toBe("pending");
    const request = state!.pending[0]!;
    expect(request).toMatchObject({ kind: "approval", args: [to, 5] });
    await server.store.answer(TENANT, run.threadId, { [request.id]: { approved: true } }, undefined);
    const done = await settled(server.store, run, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(callsOf("send").map((call) => call.to)).toEqual([to]);
  }, 120_000);

  it("a question with a lone surrogate is stored exactly and its answer with a NUL byte reaches the code", async () => {
    const question = "Which account, \udbff or \u0000?";
    const model = taskModel({
      "Ask first": {
        code: `const which = await moss.ask(${JSON.stringify(question)}); await moss.bank.pay(which, 1);`,
        final: "Paid.",
      },
    });
    const server = await instance(await freshDatabase(backend), model);
    const run = await startRun(server.store, "Ask first, then pay.");
    await settled(server.store, run, ["pending", "failed", "completed"]);
    const state = await server.store.threadState(TENANT, run.threadId);
    expect(state?.pending[0]).toMatchObject({ kind: "clarification", question });
    await server.store.answer(
      TENANT,
      run.threadId,
      { [state!.pending[0]!.id]: { answer: "sav\u0000ings" } },
      undefined,
    );
    expect((await settled(server.store, run, ["completed", "failed"])).status).toBe("completed");
    expect(callsOf("pay").map((call) => call.to)).toEqual(["sav\u0000ings"]);
  }, 120_000);

  it("a run whose outcome the database refuses ends failed once, saying so; its host call is not run again", async () => {
    const location = await freshDatabase(backend);
    const model = taskModel({
      "Pay carol": { code: "await moss.bank.pay('carol', 7);", final: "refused outcome" },
    });
    // The database refuses the row of this run's outcome, as PostgreSQL refused texts it cannot hold.
    const server = await instance(location, model, { ...SHORT_LEASE, maxTakeovers: 5 });
    await server.database.query(`
      CREATE FUNCTION refuse_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.answer = 'refused outcome' THEN RAISE EXCEPTION 'this outcome cannot be stored'; END IF;
        RETURN NEW;
      END $$`);
    await server.database.query(
      "CREATE TRIGGER refuse_outcome BEFORE UPDATE ON moss_runs FOR EACH ROW EXECUTE FUNCTION refuse_outcome()",
    );
    const run = await startRun(server.store, "Pay carol 7.");
    const done = await settled(server.store, run, ["completed", "failed"]);
    expect(done.status).toBe("failed");
    expect(done.error).toMatch(/outcome could not be stored: this outcome cannot be stored/);
    expect(done.attempts).toBe(1);
    expect(callsOf("pay")).toHaveLength(1);
  }, 120_000);

  it("a run taken over more than maxTakeovers times fails without running; attempts shows every claim", async () => {
    const location = await freshDatabase(backend);
    const model = taskModel({ "Pay dave": { code: "await moss.bank.pay('dave', 1);", final: "Paid." } });
    const api = await instance(location, model, false);
    const run = await startRun(api.store, "Pay dave 1.");
    // Three workers claim the run in turn and die at once (their 1 ms lease runs out): each later claim is a takeover.
    for (const dead of ["dead-1", "dead-2", "dead-3"]) {
      await expect
        .poll(async () => (await api.store.claimRun(dead, 1))?.run.id, { timeout: 20_000, interval: 20 })
        .toBe(run.id);
    }
    // PGlite's data directory is one process's at a time: the instance with the worker opens it next.
    await api.close(0);
    const server = await instance(location, model, { ...SHORT_LEASE, maxTakeovers: 2 });
    const done = await settled(server.store, run, ["completed", "failed"]);
    expect(done.status).toBe("failed");
    expect(done.error).toMatch(/taken over 3 times .*maxTakeovers is 2/);
    expect(done.attempts).toBe(4);
    expect(bankHost().calls).toHaveLength(0);
  }, 120_000);

  it("cancel aborts the signal of the host call in flight, and no host call starts after the cancel", async () => {
    const model = taskModel({
      "Pay erin": {
        code: "await moss.bank.pay('erin', 1); await moss.bank.pay('erin', 2); await moss.bank.pay('erin', 3);",
        final: "Paid.",
      },
    });
    const server = await instance(await freshDatabase(backend), model);
    const held = holdFirstCall();
    const run = await startRun(server.store, "Pay erin thrice.");
    const call = await held.call;
    await server.store.cancelRun(TENANT, run.threadId, run.id);
    await aborted(call.signal, "the call in flight when the run was cancelled");
    held.release();
    expect((await settled(server.store, run, ["cancelled", "completed", "failed"])).status).toBe("cancelled");
    expect(callsOf("pay").map((each) => each.amount)).toEqual([1]);
  }, 120_000);

  it("a cancel accepted while a host call runs lets no later call start (the call's checkpoint sees it)", async () => {
    const model = taskModel({
      "Pay frank": {
        code: "for (let i = 1; i <= 20; i++) { try { await moss.bank.pay('frank', i); } catch {} }",
        final: "Paid.",
      },
    });
    const server = await instance(await freshDatabase(backend), model);
    const run = await startRun(server.store, "Pay frank twenty times.");
    // The third call accepts the cancel before it returns: whatever reaches the worker when, no fourth call runs.
    bankHost().onCall = async (call) => {
      if (call.amount === 3) await server.store.cancelRun(TENANT, run.threadId, run.id);
    };
    expect((await settled(server.store, run, ["cancelled", "completed", "failed"])).status).toBe("cancelled");
    expect(callsOf("pay").map((each) => each.amount)).toEqual([1, 2, 3]);
  }, 120_000);

  it("a worker whose lease was taken over stops at once: its call in flight is aborted, it stores nothing", async () => {
    const location = await freshDatabase(backend);
    const model = taskModel({
      "Pay gina": { code: "await moss.bank.pay('gina', 1); await moss.bank.pay('gina', 2);", final: "Paid." },
    });
    const server = await instance(location, model, { leaseMs: 600_000, heartbeatMs: 100, pollMs: 600_000 });
    const held = holdFirstCall();
    const run = await startRun(server.store, "Pay gina twice.");
    const call = await held.call;
    // Another worker takes the run over, as a claim after an expired lease does (in one statement: the heartbeat of
    // the first worker cannot renew the lease in between): the first must stop.
    await takeOver(server, run, "thief");
    await aborted(call.signal, "the call in flight of the worker that lost its lease");
    held.release();
    await expect.poll(() => server.worker!.activeRuns, { timeout: 20_000, interval: 20 }).toBe(0);
    expect(callsOf("pay").map((each) => each.amount)).toEqual([1]);
    const [row] = await server.database.query<{ status: string; lease_owner: string }>(
      "SELECT status, lease_owner FROM moss_runs WHERE id = $1",
      [run.id],
    );
    expect(row).toEqual({ status: "running", lease_owner: "thief" });
  }, 120_000);

  it("a worker whose claim was taken over cannot store the checkpoint of its next call, so the call does not run", async () => {
    const location = await freshDatabase(backend);
    const model = taskModel({
      "Pay hank": { code: "await moss.bank.pay('hank', 1); await moss.bank.pay('hank', 2);", final: "Paid." },
    });
    // No heartbeat within the test: only the fencing of the checkpoint write can stop the second call.
    const server = await instance(location, model, LONG_LEASE);
    const held = holdFirstCall();
    const run = await startRun(server.store, "Pay hank twice.");
    await held.call;
    const worker = server.worker!.workerId;
    // The run is taken over by a claim under the same worker id (a new claim: a new fencing token).
    await takeOver(server, run, worker);
    held.release();
    await expect.poll(() => server.worker!.activeRuns, { timeout: 20_000, interval: 20 }).toBe(0);
    expect(callsOf("pay").map((each) => each.amount)).toEqual([1]);
  }, 120_000);
});

describe.runIf(POSTGRES_TESTS)("two instances on one PostgreSQL, one of them cut off from it", () => {
  it("a worker cut off from the database makes no call it cannot record; the instance taking over makes none twice", async () => {
    const location = (await freshDatabase("PostgreSQL")) as { url: string };
    const target = new URL(location.url);
    const proxy = await startProxy(Number(target.port));
    closers.push(proxy.close);
    const through = new URL(location.url);
    through.port = String(proxy.port);
    const model = taskModel({
      "Pay ivan": { code: "await moss.bank.pay('ivan', 1); await moss.bank.pay('ivan', 2);", final: "Paid." },
    });
    const cutOff = await instance({ url: through.toString() }, model, SHORT_LEASE);
    const held = holdFirstCall();
    const run = await startRun(cutOff.store, "Pay ivan twice.");
    const call = await held.call;
    proxy.cut();
    // The cut-off worker cannot renew its lease: it stops its run's code (the call in flight sees it).
    await aborted(call.signal, "the call in flight of the worker cut off from the database");
    held.release();
    await expect.poll(() => cutOff.worker!.activeRuns, { timeout: 20_000, interval: 20 }).toBe(0);
    expect(callsOf("pay").map((each) => each.amount)).toEqual([1]);
    // The other instance takes the run over once the lease expired: the first call, started and never recorded as
    // done, is in doubt (a person decides); the second never ran anywhere.
    const other = await instance(location, model, SHORT_LEASE);
    await settled(other.store, run, ["pending", "completed", "failed"]);
    const state = await other.store.threadState(TENANT, run.threadId);
    expect(state?.pending[0]).toMatchObject({
      kind: "approval",
      reason: "in-doubt",
      member: "pay",
      args: ["ivan", 1],
    });
    expect(callsOf("pay").map((each) => each.amount)).toEqual([1]);
    // A person says it ran: the call fails with ApprovalDenied in the code, and nothing runs twice.
    await other.store.answer(
      TENANT,
      run.threadId,
      { [state!.pending[0]!.id]: { approved: false } },
      undefined,
    );
    const done = await settled(other.store, run, ["completed", "failed"]);
    expect(done).toMatchObject({ status: "completed", attempts: 3 });
    expect(callsOf("pay").map((each) => each.amount)).toEqual([1]);
  }, 180_000);

  it("a cancel sent to another instance aborts the host call in flight on the instance running the run", async () => {
    const location = await freshDatabase("PostgreSQL");
    const model = taskModel({
      "Pay judy": { code: "await moss.bank.pay('judy', 1); await moss.bank.pay('judy', 2);", final: "Paid." },
    });
    const running = await instance(location, model, LONG_LEASE);
    const api = await instance(location, model, false);
    const held = holdFirstCall();
    const run = await startRun(api.store, "Pay judy twice.");
    const call = await held.call;
    await api.store.cancelRun(TENANT, run.threadId, run.id);
    await aborted(call.signal, "the call in flight on the other instance");
    held.release();
    expect((await settled(api.store, run, ["cancelled", "completed", "failed"])).status).toBe("cancelled");
    expect(running.worker!.activeRuns).toBe(0);
    expect(callsOf("pay").map((each) => each.amount)).toEqual([1]);
  }, 120_000);
});
