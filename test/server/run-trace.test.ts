// Issue 26, the trace: `GET /v1/threads/:threadId/runs/:runId/trace` gives the host calls of every execution of a
// run, with their arguments, results and errors bounded (cut at 1 KiB with a marker) and passed through the server's
// one redactor, to the thread's tenant only; `tracePayloads: false` (serve.tracePayloads) keeps sizes only. A real
// moss serve core (HTTP, PGlite, a worker) and the fake OpenAI server.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OpenAILanguageModel } from "../../engine/agent/openai-language-model.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { MossServer } from "../../engine/server/moss-server.ts";
import type { RunTrace } from "../../engine/server/protocol.ts";
import type { DatabaseLocation } from "../../engine/server/store/database.ts";
import { runTrace } from "../../engine/server/store/run-trace.ts";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { freshPGliteDirectory } from "../helpers/fresh-pglite.ts";
import { createPostgresDatabase } from "../helpers/postgres-database.ts";
import { POSTGRES_TESTS } from "../helpers/postgres-server.ts";
import { call, code, readEvents, runSettles, startTestServer, TRANSFER } from "./server-harness.ts";

const GREETER = resolve("test/server/fixtures/greeter/context.ts");
const MODEL_KEY = `sk-operator-${randomUUID()}`;
/** A part of the key no redaction marker or other text holds: seen anywhere, the key leaked (whole or in part). */
const KEY_PART = MODEL_KEY.slice("sk-operator-".length, "sk-operator-".length + 8);

/** Where a suite's two servers keep their data (each its own database), and how to drop them. */
type Locate = (
  directory: string,
) => Promise<{ places: [DatabaseLocation, DatabaseLocation]; end(): Promise<void> }>;

function suite(name: string, locate: Locate) {
  describe(`the run trace on ${name}`, () => {
    const replies: FakeReply[] = [];
    let model: FakeOpenAIServer;
    let greeter: MossServer;
    let sizesOnly: MossServer;
    let directory: string;
    let place: Awaited<ReturnType<Locate>>;

    beforeAll(async () => {
      directory = await mkdtemp(join(tmpdir(), "moss-trace-"));
      process.env.MOSS_VAULT_LOG = join(directory, "vault.log");
      place = await locate(directory);
      model = await startFakeOpenAIServer(replies);
      // The greeter's word holds the operator's model key: every greeting (a host call's result) carries it.
      greeter = await startTestServer(place.places[0], model.baseUrl, {
        modulePath: GREETER,
        moduleConfig: { greeting: `hello ${MODEL_KEY}` },
        model: new OpenAILanguageModel({
          baseUrl: model.baseUrl,
          apiKey: MODEL_KEY,
          model: "fake-model",
          maxRetries: 0,
        }),
      });
      sizesOnly = await startTestServer(place.places[1], model.baseUrl, {
        tracePayloads: false,
      });
    }, 120_000);
    afterAll(async () => {
      await greeter?.close(1_000);
      await sizesOnly?.close(1_000);
      await model?.close();
      await place?.end();
      await closeSharedSandboxes();
      if (directory !== undefined) await rm(directory, { recursive: true, force: true });
      delete process.env.MOSS_VAULT_LOG;
    });

    const newThread = async (server: MossServer, tenant: "alice" | "bob" = "alice") => {
      const created = await call(server, "POST", "/v1/threads", {
        tenant,
        body: { id: `t-${randomUUID()}` },
      });
      expect(created.status).toBe(201);
      return created.body.thread.id as string;
    };
    const runToEnd = async (server: MossServer, thread: string, message: string) => {
      const started = await call(server, "POST", `/v1/threads/${thread}/runs`, { body: { message } });
      expect(started.status).toBe(202);
      await readEvents(server, thread, runSettles);
      return started.body.run.id as string;
    };
    const trace = (server: MossServer, thread: string, run: string, tenant: "alice" | "bob" = "alice") =>
      call(server, "GET", `/v1/threads/${thread}/runs/${run}/trace`, { tenant });

    it("shows each call's arguments and result, a huge argument cut with the marker, the operator's key redacted", async () => {
      replies.push(
        code(
          [
            '  const a = await moss.greeter.greet("Ada");',
            '  await moss.greeter.greet("x".repeat(50000));',
            `  await moss.greeter.greet("key ${MODEL_KEY}");`,
            // The key across the 1 KiB cut: `["` and 1,000 characters before it.
            `  await moss.greeter.greet("a".repeat(1000) + "${MODEL_KEY}" + "b".repeat(3000));`,
            "  return a;",
          ].join("\n"),
        ),
        { content: "Done." },
      );
      const thread = await newThread(greeter);
      const run = await runToEnd(greeter, thread, "Greet Ada.");
      const { status, body } = await trace(greeter, thread, run);
      expect(status).toBe(200);
      const shown = body as RunTrace;
      expect(shown).toMatchObject({ runId: run, status: "completed" });
      expect(shown.executions).toHaveLength(1);
      expect(shown.executions[0]).toMatchObject({ step: 1, ok: true, paused: false });
      const [ada, huge, key, across] = shown.executions[0]!.calls;
      expect(ada).toMatchObject({ member: "greeter.greet", line: 2, outcome: "value", args: '["Ada"]' });
      expect(ada!.result).toBe('"hello [redacted], Ada"');
      expect(ada!.resultBytes).toBeGreaterThan(MODEL_KEY.length);
      expect(huge!.args!.startsWith('["xxxx')).toBe(true);
      expect(huge!.args!.endsWith("… (truncated, 50004 bytes)")).toBe(true);
      expect(huge!.args!.length).toBeLessThanOrEqual(1024 + "… (truncated, 50004 bytes)".length);
      expect(huge!.result!.startsWith('"hello [redacted], xxxx')).toBe(true);
      expect(
        huge!.result!.endsWith(`… (truncated, ${2 + "hello ".length + MODEL_KEY.length + 2 + 50_000} bytes)`),
      ).toBe(true);
      expect(key!.args).toBe('["key [redacted]"]');
      expect(across!.args!.endsWith(`… (truncated, ${2 + 1000 + MODEL_KEY.length + 3000 + 2} bytes)`)).toBe(
        true,
      );
      // Nothing of the key, in the trace or in any event of the thread.
      expect(JSON.stringify(shown)).not.toContain(KEY_PART);
      const events = await readEvents(
        greeter,
        thread,
        (event) => event.event === "run-status" && event.data.status === "completed",
      );
      expect(JSON.stringify(events)).not.toContain(KEY_PART);
      expect(JSON.stringify(events)).toContain('"args":"[\\"Ada\\"]"');
    });

    it("is the thread's tenant's only: another tenant reads 404 thread-not-found; an unknown run 404 run-not-found", async () => {
      replies.push(code('  return moss.greeter.greet("Bo");'), { content: "Done." });
      const thread = await newThread(greeter);
      const run = await runToEnd(greeter, thread, "Greet Bo.");
      expect((await trace(greeter, thread, run)).status).toBe(200);
      expect(await trace(greeter, thread, run, "bob")).toMatchObject({
        status: 404,
        body: { error: { code: "thread-not-found" } },
      });
      // Bob's own thread of the same id does not reach alice's run either.
      await call(greeter, "POST", "/v1/threads", { tenant: "bob", body: { id: thread } });
      expect(await trace(greeter, thread, run, "bob")).toMatchObject({
        status: 404,
        body: { error: { code: "run-not-found" } },
      });
      expect(await trace(greeter, thread, `run-${randomUUID()}`)).toMatchObject({
        status: 404,
        body: { error: { code: "run-not-found" } },
      });
      expect(await call(greeter, "GET", `/v1/threads/${thread}/runs/${run}/trace?after=-1`)).toMatchObject({
        status: 400,
        body: { error: { code: "query-invalid" } },
      });
    });

    it("with tracePayloads false keeps sizes only; a paused step and its resumption are two executions", async () => {
      replies.push(code(TRANSFER), { content: "Sent." });
      const thread = await newThread(sizesOnly);
      const started = await call(sizesOnly, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Pay bob 5." },
      });
      const run = started.body.run.id as string;
      const paused = await readEvents(sizesOnly, thread, runSettles);
      expect(paused.at(-1)?.data.status).toBe("pending");
      const first = (await trace(sizesOnly, thread, run)).body as RunTrace;
      expect(first.status).toBe("pending");
      expect(first.executions).toMatchObject([{ step: 1, ok: false, paused: true }]);
      expect(first.executions[0]!.calls).toMatchObject([{ member: "vault.transfer", outcome: "pending" }]);
      const request = paused.find((event) => event.event === "approval-request")!.data.request.id as string;
      const answered = await call(sizesOnly, "POST", `/v1/threads/${thread}/answers`, {
        body: { answers: { [request]: { approved: true } } },
      });
      expect(answered.status).toBeLessThan(300);
      const lastId = paused.at(-1)!.id;
      await readEvents(sizesOnly, thread, runSettles, { after: lastId });
      const done = (await trace(sizesOnly, thread, run)).body as RunTrace;
      expect(done.status).toBe("completed");
      expect(done.executions.map((execution) => [execution.step, execution.paused])).toEqual([
        [1, true],
        [1, false],
      ]);
      const transfer = done.executions[1]!.calls[0]!;
      expect(transfer).toMatchObject({ member: "vault.transfer", outcome: "value", approval: "approved" });
      expect(transfer.argsBytes).toBeGreaterThan(0);
      expect(transfer.resultBytes).toBeGreaterThan(0);
      // A page is bounded in bytes (always one execution at least): `next` reads on after it.
      const page = await runTrace(sizesOnly.database, "alice", thread, run, 0, 1);
      expect(page.executions.map((execution) => execution.eventId)).toEqual([done.executions[0]!.eventId]);
      expect(page.next).toBe(done.executions[0]!.eventId);
      const rest = (
        await call(sizesOnly, "GET", `/v1/threads/${thread}/runs/${run}/trace?after=${page.next}`)
      ).body as RunTrace;
      expect(rest.executions.map((execution) => execution.eventId)).toEqual([done.executions[1]!.eventId]);
      expect(rest).not.toHaveProperty("next");
      for (const execution of done.executions) {
        for (const call of execution.calls) {
          expect(call).not.toHaveProperty("args");
          expect(call).not.toHaveProperty("result");
          expect(call).not.toHaveProperty("error");
        }
      }
    });
  });
}

suite("PGlite", async (directory) => ({
  places: [
    { dataDirectory: await freshPGliteDirectory(join(directory, "greeter")) },
    { dataDirectory: await freshPGliteDirectory(join(directory, "vault")) },
  ],
  end: async () => {},
}));

describe.runIf(POSTGRES_TESTS)("PostgreSQL", () => {
  suite("PostgreSQL", async () => {
    const databases = [await createPostgresDatabase(), await createPostgresDatabase()];
    return {
      places: [{ url: databases[0]!.url }, { url: databases[1]!.url }],
      end: async () => {
        for (const database of databases) await database.drop();
      },
    };
  });
});
