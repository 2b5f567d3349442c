// Issue 23 §4 and §5 as attacks: nothing of the operator reaches a tenant (the model's key echoed by a hostile model
// server, the database password, other tenants' secrets, a binding's secret, host paths, saved contexts and
// continuations), and the operator sees what the server does (JSON-lines run records, the `running` status, /health,
// the model check at start). A real moss serve core (HTTP, PGlite or PostgreSQL, a worker), a real OpenAI-compatible
// HTTP server used through the real `openai` client.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OpenAILanguageModel } from "../../engine/agent/openai-language-model.ts";
import { SecretRedactor } from "../../engine/membrane/index.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { MossServer } from "../../engine/server/moss-server.ts";
import { createServerLogger } from "../../engine/server/server-log.ts";
import type { DatabaseLocation } from "../../engine/server/store/database.ts";
import { TenantTokens } from "../../engine/server/tenant-tokens.ts";
import {
  type FakeOpenAIServer,
  type FakeReply,
  refusedBaseUrl,
  startFakeOpenAIServer,
} from "../agent/fake-openai-server.ts";
import { freshPGliteDirectory } from "../helpers/fresh-pglite.ts";
import { createPostgresDatabase } from "../helpers/postgres-database.ts";
import { POSTGRES_TESTS } from "../helpers/postgres-server.ts";
import {
  call,
  code,
  readEvents,
  readSse,
  runSettles,
  startTestServer,
  TOKENS,
  TRANSFER,
  VAULT_MODULE,
} from "./server-harness.ts";

const MODULE = resolve(VAULT_MODULE);
const MODULE_FOLDER = dirname(MODULE);
const MODEL_KEY = `sk-operator-${randomUUID()}`;
/** A secret a binding of the module holds (an OpenAPI credential, an MCP header): its redactor lives in this process. */
const BINDING_SECRET = `binding-credential-${randomUUID()}`;

/** The operator's log as records (a pino destination that keeps each JSON line). */
function captureLog(): { records: Array<Record<string, any>>; stream: Writable } {
  const records: Array<Record<string, any>> = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n")) if (line.trim() !== "") records.push(JSON.parse(line));
      done();
    },
  });
  return { records, stream };
}

/**
 * An OpenAI-compatible model server that refuses every key, echoing the Authorization header in its 401 body with
 * its internal URL and an operator hint, as some proxies do; `GET /v1/models` answers the same.
 */
async function startEchoingModelServer(): Promise<{ baseUrl: string; close(): Promise<void> }> {
  const server: Server = createServer((request, response) => {
    request.resume();
    request.on("end", () => {
      const port = (server.address() as AddressInfo).port;
      response.writeHead(401, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          error: {
            message: `Incorrect API key provided: ${request.headers.authorization}. The gateway http://127.0.0.1:${port}/v1 (llm-gw-internal.corp) refused it; operators: rotate OPENAI_API_KEY in vault://ops/llm.`,
            type: "invalid_request_error",
            code: "invalid_api_key",
            param: null,
          },
        }),
      );
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

/** Reads a whole AG-UI stream (to its end) as text. */
async function aguiText(server: MossServer, body: unknown): Promise<string> {
  const response = await fetch(`${server.url}/v1/agui`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${TOKENS.alice}`,
      "content-type": "application/json",
      accept: "text/event-stream",
    },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(200);
  const messages: string[] = [];
  await readSse(response, (message) => {
    messages.push(message.data);
    const type = JSON.parse(message.data).type;
    return type === "RUN_FINISHED" || type === "RUN_ERROR";
  });
  return messages.join("\n");
}

/** Everything alice can read of a thread: its events, its state, its runs, her thread list, the playground. */
async function tenantReadable(server: MossServer, thread: string, runId: string): Promise<string> {
  const events = await readEvents(server, thread, runSettles);
  const parts = [
    JSON.stringify(events),
    JSON.stringify((await call(server, "GET", `/v1/threads/${thread}`)).body),
    JSON.stringify((await call(server, "GET", `/v1/threads/${thread}/runs/${runId}`)).body),
    JSON.stringify((await call(server, "GET", "/v1/threads")).body),
    await (await fetch(`${server.url}/`)).text(),
    await (await fetch(`${server.url}/playground.js`)).text(),
  ];
  return parts.join("\n");
}

/** Fails naming the first secret `text` holds (in plain text, or as JSON escapes it). */
function expectNoneOf(text: string, secrets: Record<string, string>): void {
  for (const [name, secret] of Object.entries(secrets)) {
    expect(text.includes(secret), `${name} ("${secret}") reached the tenant`).toBe(false);
    expect(text.includes(JSON.stringify(secret).slice(1, -1)), `${name} (escaped) reached the tenant`).toBe(
      false,
    );
  }
}

/** Where the two servers of a suite keep their data (two servers on one database would run each other's runs). */
interface Places {
  refused: DatabaseLocation;
  working: DatabaseLocation;
  end(): Promise<void>;
}

function suite(name: string, locate: (directory: string) => Promise<Places>) {
  describe(`nothing of the operator reaches a tenant, on ${name}`, () => {
    const replies: FakeReply[] = [];
    const log = captureLog();
    let place: Places;
    let directory: string;
    let echoing: { baseUrl: string; close(): Promise<void> };
    let model: FakeOpenAIServer;
    let refused: MossServer;
    let working: MossServer;
    const secrets = (): Record<string, string> => ({
      "the model API key": MODEL_KEY,
      "bob's token": TOKENS.bob,
      "the binding's secret": BINDING_SECRET,
      "the module's host folder": MODULE_FOLDER,
      "the data directory": directory,
      ...("url" in place.working
        ? {
            "the database URL": place.working.url,
            "the database password": decodeURIComponent(new URL(place.working.url).password),
          }
        : {}),
    });

    // The harness's server with the operator's own model key and a log the tests read (the module by its absolute
    // path, so its host folder is one the redactor must hide).
    const start = (modelUrl: string, location: DatabaseLocation) =>
      startTestServer(location, modelUrl, {
        modulePath: MODULE,
        model: new OpenAILanguageModel({
          baseUrl: modelUrl,
          apiKey: MODEL_KEY,
          model: "fake-model",
          maxRetries: 0,
        }),
        logger: createServerLogger("debug", log.stream),
      });

    beforeAll(async () => {
      directory = await mkdtemp(join(tmpdir(), "moss-redact-"));
      process.env.MOSS_VAULT_LOG = join(directory, "vault.log");
      place = await locate(directory);
      // A binding of the module binds its credential in this process (as openApiService does).
      new SecretRedactor().add(BINDING_SECRET);
      echoing = await startEchoingModelServer();
      model = await startFakeOpenAIServer(replies);
      refused = await start(echoing.baseUrl, place.refused);
      working = await start(model.baseUrl, place.working);
    }, 120_000);
    afterAll(async () => {
      await refused?.close(1_000);
      await working?.close(1_000);
      await echoing?.close();
      await model?.close();
      await place?.end();
      await closeSharedSandboxes();
      await rm(directory, { recursive: true, force: true });
      delete process.env.MOSS_VAULT_LOG;
    });

    const newThread = async (server: MossServer) => {
      const created = await call(server, "POST", "/v1/threads", { body: { id: `t-${randomUUID()}` } });
      expect(created.status).toBe(201);
      return created.body.thread.id as string;
    };

    it("a model server echoing the API key in its 401: the tenant reads model-unavailable, never the key, its URL or the hint", async () => {
      const thread = await newThread(refused);
      const started = await call(refused, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Hello?" },
      });
      expect(started.status).toBe(202);
      const readable = await tenantReadable(refused, thread, started.body.run.id);
      expectNoneOf(readable, {
        ...secrets(),
        "the model URL": echoing.baseUrl,
        "the model host": new URL(echoing.baseUrl).host,
        "the gateway's name": "llm-gw-internal",
        "the operator hint": "OPENAI_API_KEY",
        "the vault hint": "vault://ops",
      });
      const run = (await call(refused, "GET", `/v1/threads/${thread}/runs/${started.body.run.id}`)).body.run;
      expect(run).toMatchObject({ status: "failed", error: "The model is unavailable; try again later." });
      const events = await readEvents(refused, thread, runSettles);
      const error = events.find((event) => event.event === "error");
      expect(error?.data).toMatchObject({
        error: { code: "model-unavailable" },
        message: "The model is unavailable; try again later.",
      });
      expect(events.find((event) => event.event === "run-end")?.data.reason).toBe(
        "The model is unavailable; try again later.",
      );
    });

    it("the same failure through AG-UI reads RUN_ERROR model-unavailable, without the key or the URL", async () => {
      const text = await aguiText(refused, {
        threadId: `agui-${randomUUID()}`,
        runId: randomUUID(),
        messages: [{ id: "m1", role: "user", content: "Hello?" }],
        state: {},
        tools: [],
        context: [],
        forwardedProps: {},
      });
      expect(text).toContain("The model is unavailable");
      expect(JSON.parse(text.split("\n").at(-1)!)).toMatchObject({
        type: "RUN_ERROR",
        code: "model-unavailable",
      });
      expectNoneOf(text, {
        ...secrets(),
        "the model URL": echoing.baseUrl,
        "the operator hint": "OPENAI_API_KEY",
      });
    });

    it("the operator's log keeps the model error's details (code, status, URL, the body) with tenant, thread and run", async () => {
      const thread = await newThread(refused);
      const started = await call(refused, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Again?" },
      });
      await readEvents(refused, thread, runSettles);
      const record = log.records.find(
        (entry) => entry.event === "run-error" && entry.run === started.body.run.id,
      );
      expect(record).toMatchObject({
        level: 50,
        tenant: "alice",
        thread,
        run: started.body.run.id,
        error: {
          code: "model-auth",
          details: { baseUrl: echoing.baseUrl, status: 401 },
          cause: { status: 401, body: { code: "invalid_api_key" } },
        },
      });
      expect(record!.error.message).toContain(echoing.baseUrl);
    });

    it("a model answer repeating the operator's secrets reaches the tenant redacted: text, message, answer, run, AG-UI", async () => {
      const said = `key ${MODEL_KEY}, bob ${TOKENS.bob}, binding ${BINDING_SECRET}, at ${MODULE_FOLDER}/vault.ts, data ${directory}${
        "url" in place.working ? `, db ${place.working.url}` : ""
      }`;
      replies.push({ content: said });
      const thread = await newThread(working);
      const started = await call(working, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Tell me." },
      });
      const readable = await tenantReadable(working, thread, started.body.run.id);
      expectNoneOf(readable, secrets());
      const run = (await call(working, "GET", `/v1/threads/${thread}/runs/${started.body.run.id}`)).body.run;
      expect(run.status).toBe("completed");
      expect(run.answer).toContain("[redacted]");
      expect(run.answer).toContain("<host path>");
      replies.push({ content: said });
      const agui = await aguiText(working, {
        threadId: `agui-${randomUUID()}`,
        runId: randomUUID(),
        messages: [{ id: "m1", role: "user", content: "Tell me." }],
        state: {},
        tools: [],
        context: [],
        forwardedProps: {},
      });
      expect(agui).toContain("[redacted]");
      expectNoneOf(agui, secrets());
    });

    it("events carry no saved context, continuation or host path; the paused run still resumes from the server's tables", async () => {
      replies.push(code(TRANSFER), { content: "Sent." });
      const thread = await newThread(working);
      const started = await call(working, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Pay bob 5." },
      });
      const paused = await readEvents(working, thread, runSettles);
      expect(paused.at(-1)?.data.status).toBe("pending");
      const execution = paused.find((event) => event.event === "execution")!;
      expect(execution.data.execution.pending.requests).toHaveLength(1);
      expect(Object.keys(execution.data.execution)).not.toContain("context");
      expect(Object.keys(execution.data.execution.pending)).toEqual(["requests"]);
      for (const event of paused.filter((item) => item.event === "message")) {
        expect(Object.keys(event.data.message.metadata)).not.toContain("context");
        expect(Object.keys(event.data.message.metadata)).not.toContain("pending");
      }
      const text = JSON.stringify(paused);
      expect(text).not.toContain(MODULE);
      expect(text).not.toContain(MODULE_FOLDER);
      expect(text).not.toContain('"continuation"');
      expect(text).not.toContain('"properties"');
      const request = paused.find((event) => event.event === "approval-request")!.data.request.id;
      const answered = await call(working, "POST", `/v1/threads/${thread}/answers`, {
        body: { answers: { [request]: { approved: true } } },
      });
      expect(answered.status).toBe(202);
      const resumed = await readEvents(
        working,
        thread,
        (event) => runSettles(event) && event.id > paused.at(-1)!.id,
        {
          after: paused.at(-1)!.id,
        },
      );
      expect(resumed.at(-1)?.data.status).toBe("completed");
      expect(JSON.stringify(resumed)).not.toContain(MODULE_FOLDER);
      expect(JSON.stringify(resumed)).not.toContain('"context"');
      expect(started.body.run.id).toBe(resumed.at(-1)?.data.run.id);
    });

    it("publishes the running status: queued, running, then the answer streams, then completed", async () => {
      replies.push({ content: "Hello there." });
      const thread = await newThread(working);
      await call(working, "POST", `/v1/threads/${thread}/runs`, { body: { message: "Hi" } });
      const events = await readEvents(working, thread, runSettles);
      const statuses = events
        .filter((event) => event.event === "run-status")
        .map((event) => event.data.status);
      expect(statuses).toEqual(["queued", "running", "completed"]);
      const running = events.findIndex(
        (event) => event.event === "run-status" && event.data.status === "running",
      );
      expect(running).toBeLessThan(events.findIndex((event) => event.event === "run-start"));
      expect(events[running]!.data.run).toMatchObject({ status: "running", attempts: 1 });
    });

    it("logs each run as JSON records: claimed and ended with tenant, thread, run, attempt, status and duration", async () => {
      replies.push({ content: "Logged." });
      const thread = await newThread(working);
      const started = await call(working, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Log me" },
      });
      await readEvents(working, thread, runSettles);
      const ofRun = log.records.filter((entry) => entry.run === started.body.run.id);
      expect(ofRun.map((entry) => entry.event)).toEqual(["run-claimed", "run-ended"]);
      for (const entry of ofRun) {
        expect(entry).toMatchObject({
          tenant: "alice",
          thread,
          worker: working.worker!.workerId,
          attempt: 1,
        });
        expect(typeof entry.time).toBe("number");
      }
      expect(ofRun[1]).toMatchObject({ status: "completed", stopReason: "answer", level: 30 });
      expect(typeof ofRun[1]!.durationMs).toBe("number");
    });
  });
}

suite("PGlite", async (directory) => ({
  refused: { dataDirectory: await freshPGliteDirectory(join(directory, "data-refused")) },
  working: { dataDirectory: await freshPGliteDirectory(join(directory, "data-working")) },
  end: async () => {},
}));

describe.runIf(POSTGRES_TESTS)("PostgreSQL", () => {
  suite("PostgreSQL", async () => {
    const refused = await createPostgresDatabase();
    const working = await createPostgresDatabase();
    return {
      refused: { url: refused.url },
      working: { url: working.url },
      end: async () => {
        await refused.drop();
        await working.drop();
      },
    };
  });
});

describe("the operator sees the server's state", () => {
  let directory: string;
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), "moss-health-"));
    process.env.MOSS_VAULT_LOG = join(directory, "vault.log");
  });
  afterAll(async () => {
    await closeSharedSandboxes();
    await rm(directory, { recursive: true, force: true });
    delete process.env.MOSS_VAULT_LOG;
  });

  const serve = async (modelUrl: string, data: string, records = captureLog()) => ({
    records: records.records,
    server: await startTestServer({ dataDirectory: join(directory, data) }, modelUrl, {
      modulePath: MODULE,
      model: new OpenAILanguageModel({
        baseUrl: modelUrl,
        apiKey: MODEL_KEY,
        model: "fake-model",
        maxRetries: 0,
      }),
      http: { port: 0, tokens: TenantTokens.parse([`alice:${TOKENS.alice}`], "test") },
      logger: createServerLogger("info", records.stream),
    }),
  });

  it("warns the operator at start when the model server does not answer, and starts anyway", async () => {
    const down = await refusedBaseUrl();
    const { records, server } = await serve(down, "down");
    try {
      await server.modelChecked;
      const warning = records.find((entry) => entry.event === "model-check");
      expect(warning).toMatchObject({ level: 40, model: "fake-model" });
      expect(warning!.msg).toMatch(/model server does not answer/);
      expect(warning!.msg).toContain(down);
      expect((await call(server, "GET", "/health", { tenant: null })).status).toBe(200);
    } finally {
      await server.close(1_000);
    }
  });

  it("warns at start when the model server refuses the API key; stays quiet when it answers", async () => {
    const echoing = await startEchoingModelServer();
    const fine = await startFakeOpenAIServer([]);
    const refusing = await serve(echoing.baseUrl, "refusing");
    const answering = await serve(fine.baseUrl, "answering");
    try {
      await refusing.server.modelChecked;
      await answering.server.modelChecked;
      const warning = refusing.records.find((entry) => entry.event === "model-check");
      expect(warning).toMatchObject({ level: 40 });
      expect(warning!.msg).toMatch(/refused the API key \(401\)/);
      expect(answering.records.find((entry) => entry.event === "model-check")).toMatchObject({ level: 30 });
    } finally {
      await refusing.server.close(1_000);
      await answering.server.close(1_000);
      await echoing.close();
      await fine.close();
    }
  });

  it("GET /health reports the database and the worker as JSON; 503 once the database is gone", async () => {
    const fine = await startFakeOpenAIServer([]);
    const { server } = await serve(fine.baseUrl, "health");
    try {
      const healthy = await call(server, "GET", "/health", { tenant: null });
      expect(healthy).toEqual({
        status: 200,
        body: {
          status: "ok",
          version: "test",
          database: { status: "ok" },
          worker: { status: "running", activeRuns: 0, concurrency: 8 },
        },
      });
      await server.worker!.stop(0);
      await server.database.close();
      const down = await call(server, "GET", "/health", { tenant: null });
      expect(down.status).toBe(503);
      expect(down.body).toMatchObject({
        status: "degraded",
        database: { status: "unreachable" },
        worker: { status: "stopped" },
      });
    } finally {
      await server.close(1_000).catch(() => {});
      await fine.close();
    }
  });
});
