// Two `moss serve` instances on one real PostgreSQL (issue 18): the instance running a run is killed with
// SIGKILL in the middle of it; its lease expires and the other instance takes the run over and completes it once.
// The model is the fake OpenAI server behind a gate that can hold requests (so the kill lands mid-run).
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, request, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { createPostgresDatabase, type PostgresDatabase } from "../helpers/postgres-database.ts";
import { POSTGRES_TESTS } from "../helpers/postgres-server.ts";
import { call, readEvents, type ServeProcess, spawnServe } from "./server-harness.ts";

const MODULE = "test/server/fixtures/ledger/context.ts";

/** A stored checkpoint's payload (readable by design): the code it runs and its log. */
function payloadOf(checkpoint: string): { code: string; log: Array<{ key: string; started?: boolean }> } {
  return JSON.parse(Buffer.from(checkpoint.split(".")[1]!, "base64url").toString("utf8"));
}

/** Forwards to `target`; while `holding`, requests wait unanswered. */
async function startGate(
  target: string,
): Promise<{ url: string; holding: boolean; held: number; close(): Promise<void> }> {
  const waiting: ServerResponse[] = [];
  const gate = {
    url: "",
    holding: true,
    held: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const response of waiting) response.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((incoming, response) => {
    if (gate.holding) {
      gate.held++;
      waiting.push(response);
      return;
    }
    const upstream = new URL(target);
    const forward = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        path: `${upstream.pathname.replace(/\/$/, "")}${incoming.url?.replace(/^\/v1/, "")}`,
        method: incoming.method,
        headers: incoming.headers,
      },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    incoming.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  gate.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return gate;
}

describe.runIf(POSTGRES_TESTS)("two moss serve instances on one PostgreSQL", () => {
  const replies: FakeReply[] = [];
  let postgres: PostgresDatabase;
  let model: FakeOpenAIServer;
  let directory: string;
  const instances: ServeProcess[] = [];

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), "moss-takeover-"));
    postgres = await createPostgresDatabase();
    model = await startFakeOpenAIServer(replies);
  }, 60_000);
  afterAll(async () => {
    for (const instance of instances) instance.child.kill("SIGKILL");
    await model?.close();
    await postgres?.drop();
    await rm(directory, { recursive: true, force: true });
  });

  /**
   * Two instances on the test database, their ledger writing to `logName` in the test's directory. The lease is long
   * enough that a late heartbeat on a loaded machine does not hand a run over early (a call would then be in doubt,
   * and the run pause before the call a test holds has started).
   */
  async function startPair(logName: string): Promise<{ log: string; pair: [ServeProcess, ServeProcess] }> {
    const log = join(directory, logName);
    const env = { MOSS_LEDGER_LOG: log, OPENAI_API_KEY: "test", MOSS_SERVE_TOKENS: "alice:alice-secret" };
    const args = [
      "serve",
      MODULE,
      "--port",
      "0",
      "--database-url",
      postgres.url,
      "--base-url",
      model.baseUrl,
    ];
    const pair: [ServeProcess, ServeProcess] = [
      await spawnServe([...args, "--lease-ms", "5000"], env),
      await spawnServe([...args, "--lease-ms", "5000"], env),
    ];
    instances.push(...pair);
    return { log, pair };
  }

  it("a run whose instance is killed with SIGKILL mid-run is taken over by the other and completes once", async () => {
    const gate = await startGate(model.baseUrl);
    const env = {
      MOSS_LEDGER_LOG: join(directory, "ledger.log"),
      OPENAI_API_KEY: "test",
      MOSS_SERVE_TOKENS: "alice:alice-secret",
    };
    const args = [
      "serve",
      MODULE,
      "--port",
      "0",
      "--database-url",
      postgres.url,
      "--base-url",
      gate.url,
      "--lease-ms",
      "2000",
    ];
    instances.push(await spawnServe(args, env), await spawnServe(args, env));
    const [first, second] = instances as [ServeProcess, ServeProcess];
    const thread = `takeover-${randomUUID()}`;
    expect((await call(first, "POST", "/v1/threads", { body: { id: thread } })).status).toBe(201);
    const started = await call(second, "POST", `/v1/threads/${thread}/runs`, {
      body: { message: "Note 'once'." },
    });
    expect(started.status).toBe(202);
    const runId = started.body.run.id;
    await readEvents(first, thread, (event) => event.event === "run-start");
    // The instance holding the run is the one whose pid its lease names.
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    const { rows } = await client.query("SELECT lease_owner FROM moss_runs WHERE id = $1", [runId]);
    await client.end();
    const owner = instances.find(
      (instance) => String(rows[0].lease_owner).split(":")[1] === String(instance.child.pid),
    )!;
    const survivor = owner === first ? second : first;
    expect(owner).toBeDefined();
    owner.child.kill("SIGKILL");
    await owner.exited;

    replies.push(
      {
        content: "",
        toolCalls: [
          {
            name: "moss",
            arguments: JSON.stringify({
              code: 'async function main(moss: Moss) {\n  console.log(await moss.ledger.record("once"));\n}',
            }),
          },
        ],
      },
      { content: "Noted." },
    );
    gate.holding = false;
    const events = await readEvents(
      survivor,
      thread,
      (event) => event.event === "run-status" && event.data.status === "completed",
    );
    const run = await call(survivor, "GET", `/v1/threads/${thread}/runs/${runId}`);
    expect(run.body.run).toMatchObject({ status: "completed", answer: "Noted.", attempts: 2 });
    expect(events.filter((event) => event.event === "run-end")).toHaveLength(1);
    expect(
      events.filter((event) => event.event === "run-status" && event.data.status === "completed"),
    ).toHaveLength(1);
    expect((await readFile(env.MOSS_LEDGER_LOG, "utf8")).split("\n").filter(Boolean)).toEqual(["once"]);
    // The thread is free again on both sides of the database.
    expect((await call(survivor, "GET", `/v1/threads/${thread}`)).body.status).toBe("idle");
    survivor.child.kill("SIGTERM");
    expect(await survivor.exited).toBe(0);
    await gate.close();
  }, 180_000);

  it("a run killed AFTER a host call completed resumes by replay on the other: the call is not made again, the model not asked again; the call in flight at the kill waits for a person's yes", async () => {
    const { log, pair } = await startPair("replay-ledger.log");
    const asked = model.requests.length;
    replies.push(
      {
        content: "",
        toolCalls: [
          {
            name: "moss",
            arguments: JSON.stringify({
              code: 'async function main(moss: Moss) {\n  await moss.ledger.record("once");\n  console.log(await moss.ledger.record("hold then twice"));\n}',
            }),
          },
        ],
      },
      { content: "Noted." },
    );
    const thread = `replay-${randomUUID()}`;
    expect((await call(pair[0], "POST", "/v1/threads", { body: { id: thread } })).status).toBe(201);
    const started = await call(pair[1], "POST", `/v1/threads/${thread}/runs`, {
      body: { message: "Note twice." },
    });
    expect(started.status).toBe(202);
    const runId = started.body.run.id;
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    // The first call completed and its checkpoint is stored; the second call is out (held) when the owner dies.
    let owner: ServeProcess | undefined;
    let row: Record<string, unknown> | undefined;
    for (let attempt = 0; attempt < 1_500 && owner === undefined; attempt++) {
      const { rows } = await client.query("SELECT lease_owner, checkpoint FROM moss_runs WHERE id = $1", [
        runId,
      ]);
      row = rows[0];
      // The held call (the second) has started; checkpoints are also stored as the code begins and as "once" starts.
      if (rows[0]?.checkpoint && payloadOf(rows[0].checkpoint).log[1]?.started) {
        owner = pair.find(
          (instance) => String(rows[0].lease_owner).split(":")[1] === String(instance.child.pid),
        );
      } else await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await client.end();
    expect(owner, `the run never stored a checkpoint: ${JSON.stringify(row)}`).toBeDefined();
    expect((await readFile(log, "utf8")).split("\n").filter(Boolean)).toEqual(["once"]);
    const survivor = owner === pair[0] ? pair[1] : pair[0];
    owner!.child.kill("SIGKILL");
    await owner!.exited;
    await writeFile(`${log}.release`, "");
    // The held call had started when the owner died: it may have run, and `record` is not @idempotent, so the
    // survivor does not run it again blindly. The run pauses with a request naming the call.
    const paused = await readEvents(
      survivor,
      thread,
      (event) => event.event === "run-status" && event.data.status === "pending",
    );
    const inDoubt = paused.find((event) => event.event === "approval-request")?.data.request;
    expect(inDoubt).toMatchObject({
      kind: "approval",
      reason: "in-doubt",
      service: "ledger",
      member: "record",
      args: ["hold then twice"],
    });
    expect((await readFile(log, "utf8")).split("\n").filter(Boolean)).toEqual(["once"]);
    expect(
      (
        await call(survivor, "POST", `/v1/threads/${thread}/answers`, {
          body: { answers: { [inDoubt.id]: { approved: true } } },
        })
      ).status,
    ).toBe(202);
    const events = await readEvents(
      survivor,
      thread,
      (event) => event.event === "run-status" && event.data.status === "completed",
    );
    const run = await call(survivor, "GET", `/v1/threads/${thread}/runs/${runId}`);
    // Claimed three times: by the owner, by the survivor at the takeover, by a worker once the answer came.
    expect(run.body.run).toMatchObject({ status: "completed", answer: "Noted.", attempts: 3 });
    // "once" ran on the dead instance only; the survivor replayed it and, on the person's yes, made the held call.
    expect((await readFile(log, "utf8")).split("\n").filter(Boolean)).toEqual(["once", "hold then twice"]);
    // The model answered the interrupted step once (before the kill) and the next step once: two requests.
    expect(model.requests.length - asked).toBe(2);
    // The agent's run ended twice: paused on the request, then finished once.
    expect(
      events.filter((event) => event.event === "run-end").map((event) => event.data.stopReason === "pending"),
    ).toEqual([true, false]);
    survivor.child.kill("SIGTERM");
    expect(await survivor.exited).toBe(0);
  }, 300_000);

  it("a step of several tool calls killed in its second runs neither its first again nor asks the model again", async () => {
    const { log, pair } = await startPair("step-ledger.log");
    const asked = model.requests.length;
    const tool = (code: string) => ({ name: "moss", arguments: JSON.stringify({ code }) });
    replies.push(
      {
        content: "",
        toolCalls: [
          tool('async function main(moss: Moss) {\n  console.log(await moss.ledger.record("first"));\n}'),
          tool(
            'async function main(moss: Moss) {\n  console.log(await moss.ledger.record("hold second"));\n}',
          ),
        ],
      },
      { content: "Noted both." },
    );
    const thread = `step-${randomUUID()}`;
    expect((await call(pair[0], "POST", "/v1/threads", { body: { id: thread } })).status).toBe(201);
    const started = await call(pair[1], "POST", `/v1/threads/${thread}/runs`, {
      body: { message: "Note two things." },
    });
    const runId = started.body.run.id;
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    // The second tool call's code is running (its held call started) when the owner dies.
    let owner: ServeProcess | undefined;
    let seen: unknown;
    for (let attempt = 0; attempt < 1_500 && owner === undefined; attempt++) {
      const { rows } = await client.query(
        "SELECT status, lease_owner, checkpoint, error FROM moss_runs WHERE id = $1",
        [runId],
      );
      const payload = rows[0]?.checkpoint ? payloadOf(rows[0].checkpoint) : undefined;
      seen = { ...rows[0], checkpoint: payload };
      if (payload?.code.includes("hold second") && payload.log[0]?.started) {
        owner = pair.find(
          (instance) => String(rows[0].lease_owner).split(":")[1] === String(instance.child.pid),
        );
      } else await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await client.end();
    expect(owner, `the second tool call never stored a checkpoint: ${JSON.stringify(seen)}`).toBeDefined();
    expect((await readFile(log, "utf8")).split("\n").filter(Boolean)).toEqual(["first"]);
    const survivor = owner === pair[0] ? pair[1] : pair[0];
    owner!.child.kill("SIGKILL");
    await owner!.exited;
    await writeFile(`${log}.release`, "");
    // The survivor continues the step at its second tool call: the held call is in doubt, a person says yes.
    const paused = await readEvents(
      survivor,
      thread,
      (event) => event.event === "run-status" && event.data.status === "pending",
    );
    const inDoubt = paused.find((event) => event.event === "approval-request")?.data.request;
    expect(inDoubt).toMatchObject({ reason: "in-doubt", member: "record", args: ["hold second"] });
    await call(survivor, "POST", `/v1/threads/${thread}/answers`, {
      body: { answers: { [inDoubt.id]: { approved: true } } },
    });
    await readEvents(
      survivor,
      thread,
      (event) => event.event === "run-status" && event.data.status === "completed",
    );
    const run = await call(survivor, "GET", `/v1/threads/${thread}/runs/${runId}`);
    expect(run.body.run).toMatchObject({ status: "completed", answer: "Noted both." });
    // The first tool call ran once (on the dead instance); the model answered the step once and the next once.
    expect((await readFile(log, "utf8")).split("\n").filter(Boolean)).toEqual(["first", "hold second"]);
    expect(model.requests.length - asked).toBe(2);
    // The model saw one observation per tool call of the step, in order.
    const messages = model.requests.at(-1)!.body.messages as Array<{ role: string; tool_call_id?: string }>;
    expect(messages.filter((message) => message.role === "tool")).toHaveLength(2);
    survivor.child.kill("SIGTERM");
    expect(await survivor.exited).toBe(0);
  }, 300_000);
});
