// The native HTTP API v1 of `moss serve` (issue 18), end to end: a real HTTP server on 127.0.0.1, a real worker
// running the vault module's agent against the fake OpenAI server, and the same suite on PGlite and on a real
// PostgreSQL. Every transfer that really ran is a line of the vault's log file.
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { MossServer } from "../../engine/server/moss-server.ts";
import type { DatabaseLocation } from "../../engine/server/store/database.ts";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { pgliteSuiteDatabase } from "../helpers/fresh-pglite.ts";
import { createPostgresDatabase, type PostgresDatabase } from "../helpers/postgres-database.ts";
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
} from "./server-harness.ts";

function suite(name: string, locate: () => Promise<{ location: DatabaseLocation; end(): Promise<void> }>) {
  describe(`moss serve API on ${name}`, () => {
    const replies: FakeReply[] = [];
    let model: FakeOpenAIServer;
    let server: MossServer;
    let place: { location: DatabaseLocation; end(): Promise<void> };
    let directory: string;

    beforeAll(async () => {
      directory = await mkdtemp(join(tmpdir(), "moss-serve-"));
      process.env.MOSS_VAULT_LOG = join(directory, "vault.log");
      place = await locate();
      model = await startFakeOpenAIServer(replies);
      server = await startTestServer(place.location, model.baseUrl, {
        tenantLimits: { bob: { maxActiveRuns: 1 } },
      });
    }, 60_000);
    afterAll(async () => {
      await server?.close(1_000);
      await model?.close();
      await place?.end();
      await closeSharedSandboxes();
      await rm(directory, { recursive: true, force: true });
      delete process.env.MOSS_VAULT_LOG;
    });

    const transfers = async () =>
      (await readFile(process.env.MOSS_VAULT_LOG!, "utf8").catch(() => "")).split("\n").filter(Boolean);
    const newThread = async (tenant: "alice" | "bob" = "alice") => {
      const created = await call(server, "POST", "/v1/threads", {
        tenant,
        body: { id: `t-${randomUUID()}` },
      });
      expect(created.status).toBe(201);
      return created.body.thread.id as string;
    };

    it("answers /health without a token and refuses /v1 without a known bearer token (401, the error shape)", async () => {
      expect(await call(server, "GET", "/health", { tenant: null })).toEqual({
        status: 200,
        body: {
          status: "ok",
          version: "test",
          database: { status: "ok" },
          worker: { status: "running", activeRuns: expect.any(Number), concurrency: 8 },
        },
      });
      const missing = await call(server, "GET", "/v1/threads", { tenant: null });
      expect(missing.status).toBe(401);
      expect(missing.body.error.code).toBe("unauthorized");
      const wrong = await call(server, "GET", "/v1/threads", {
        tenant: null,
        headers: { authorization: "Bearer alice" },
      });
      expect(wrong).toMatchObject({ status: 401, body: { error: { code: "unauthorized" } } });
    });

    it("creates threads per tenant (a chosen id twice is 200 with the same thread) and hides them from other tenants as 404", async () => {
      const id = `mine-${randomUUID()}`;
      const first = await call(server, "POST", "/v1/threads", { body: { id, metadata: { title: "hello" } } });
      expect(first.status).toBe(201);
      expect(first.body.thread).toMatchObject({ id, metadata: { title: "hello" } });
      const again = await call(server, "POST", "/v1/threads", { body: { id } });
      expect(again).toEqual({ status: 200, body: first.body });
      const second = await newThread();
      const listed = await call(server, "GET", "/v1/threads?limit=2");
      expect(listed.body.threads.map((thread: { id: string }) => thread.id)).toEqual([second, id]);
      const state = await call(server, "GET", `/v1/threads/${id}`);
      expect(state.body).toMatchObject({ thread: { id }, status: "idle", pending: [], lastEventId: 0 });

      expect(await call(server, "GET", `/v1/threads/${id}`, { tenant: "bob" })).toMatchObject({
        status: 404,
        body: { error: { code: "thread-not-found" } },
      });
      const absent = await call(server, "GET", `/v1/threads/never-${randomUUID()}`, { tenant: "bob" });
      expect(absent.status).toBe(404);
      expect(absent.body.error.code).toBe("thread-not-found");
      for (const path of [`/v1/threads/${id}/runs`, `/v1/threads/${id}/answers`]) {
        const body = path.endsWith("runs") ? { message: "hi" } : { answers: { r1: { approved: true } } };
        expect((await call(server, "POST", path, { tenant: "bob", body })).status).toBe(404);
      }
      const bobs = await call(server, "GET", "/v1/threads", { tenant: "bob" });
      expect(bobs.body.threads.map((thread: { id: string }) => thread.id)).not.toContain(id);
      // Bob may use the same id: it is his own thread.
      expect((await call(server, "POST", "/v1/threads", { tenant: "bob", body: { id } })).status).toBe(201);
    });

    it("threads share the module compiled once, never their data: one thread's notes are not another's", async () => {
      const completed = (event: { event: string; data: Record<string, any> }) =>
        event.event === "run-status" && event.data.status === "completed";
      const stdout = (events: Array<{ event: string; data: Record<string, any> }>) =>
        events
          .filter((event) => event.event === "execution")
          .map((event) => String(event.data.execution.stdout))
          .join("");
      replies.push(
        code('  moss.notes.push("secret of A");\n  console.log("notes", JSON.stringify(moss.notes));'),
        {
          content: "Kept.",
        },
      );
      const first = await newThread();
      expect(
        (await call(server, "POST", `/v1/threads/${first}/runs`, { body: { message: "Keep it." } })).status,
      ).toBe(202);
      const firstEvents = await readEvents(server, first, completed);
      replies.push(code('  console.log("notes", JSON.stringify(moss.notes));'), { content: "Read." });
      const second = await newThread();
      expect(
        (await call(server, "POST", `/v1/threads/${second}/runs`, { body: { message: "Read it." } })).status,
      ).toBe(202);
      const secondEvents = await readEvents(server, second, completed);
      expect(stdout(firstEvents)).toContain('notes ["secret of A"]');
      expect(stdout(secondEvents)).toContain("notes []");
    });

    it("runs a message and streams its stored AgentEvents with ids 1, 2, 3…; a reconnect with Last-Event-ID or ?after= gets exactly the rest", async () => {
      replies.push(code('  console.log("balance", await moss.vault.balance());'), {
        content: "You have 100 euros.",
      });
      const thread = await newThread();
      const started = await call(server, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "What is my balance?" },
      });
      expect(started.status).toBe(202);
      expect(started.body.run).toMatchObject({ threadId: thread, status: "queued" });
      const runId = started.body.run.id;
      const events = await readEvents(
        server,
        thread,
        (event) => event.event === "run-status" && event.data.status === "completed",
      );
      expect(events.map((event) => event.id)).toEqual(events.map((_, index) => index + 1));
      const types = events.map((event) => event.event);
      expect(types[0]).toBe("run-status");
      expect(types).toContain("run-start");
      expect(types).toContain("code");
      expect(
        types,
        JSON.stringify(events.map((event) => [event.event, event.data.message ?? event.data.code ?? ""])),
      ).toContain("execution");
      expect(types.at(-2)).toBe("run-end");
      for (const event of events) expect(event.data.runId).toBe(runId);
      const end = events.find((event) => event.event === "run-end")!;
      expect(end.data).toMatchObject({
        type: "run-end",
        stopReason: "answer",
        answer: "You have 100 euros.",
      });
      const execution = events.find((event) => event.event === "execution")!;
      expect(execution.data.execution.stdout).toContain("balance 100");

      const run = await call(server, "GET", `/v1/threads/${thread}/runs/${runId}`);
      expect(run.body.run).toMatchObject({
        status: "completed",
        stopReason: "answer",
        answer: "You have 100 euros.",
      });
      const last = events.at(-1)!.id;
      expect((await call(server, "GET", `/v1/threads/${thread}`)).body).toMatchObject({
        status: "idle",
        lastEventId: last,
      });

      const rest = await readEvents(server, thread, (event) => event.id === last, { after: 3 });
      expect(rest).toEqual(events.slice(3));
      const viaQuery = await readEvents(server, thread, (event) => event.id === last, {
        query: `?after=${last - 1}`,
      });
      expect(viaQuery).toEqual([events.at(-1)]);
      // Nothing a stream sent is ever re-sent with another id: the whole list is stored.
      const again = await readEvents(server, thread, (event) => event.id === last);
      expect(again).toEqual(events);
    });

    it("pauses on an @approval call with its pending request; answers with an Idempotency-Key resume it once, on the same key the same response", async () => {
      replies.push(code(TRANSFER), { content: "Sent 5 euros to bob." });
      const before = (await transfers()).length;
      const thread = await newThread();
      const { body } = await call(server, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Send bob 5 euros." },
      });
      const paused = await readEvents(server, thread, runSettles);
      expect(paused.at(-1)!.data.status).toBe("pending");
      const approval = paused.find((event) => event.event === "approval-request")!;
      const requestId = approval.data.request.id;
      expect(approval.data.request).toMatchObject({
        kind: "approval",
        service: "vault",
        member: "transfer",
        args: ["bob", 5],
      });
      // The engine describes the request once; the stored event carries its words for every client.
      expect(approval.data.description).toMatch(
        new RegExp(`^#${requestId} approval vault\\.transfer\\("bob", 5\\) at line \\d+$`),
      );
      const state = await call(server, "GET", `/v1/threads/${thread}`);
      expect(state.body.status).toBe("pending");
      expect(state.body.pending.map((request: { id: string }) => request.id)).toEqual([requestId]);
      expect(
        await call(server, "POST", `/v1/threads/${thread}/runs`, { body: { message: "another" } }),
      ).toMatchObject({
        status: 409,
        body: { error: { code: "thread-busy" } },
      });

      expect(
        await call(server, "POST", `/v1/threads/${thread}/answers`, {
          body: { answers: { nope: { approved: true } } },
        }),
      ).toMatchObject({ status: 404, body: { error: { code: "request-unknown" } } });
      expect(
        await call(server, "POST", `/v1/threads/${thread}/answers`, {
          body: { answers: { [requestId]: { answer: "yes" } } },
        }),
      ).toMatchObject({ status: 400, body: { error: { code: "answer-invalid" } } });
      expect(
        await call(server, "POST", `/v1/threads/${thread}/answers`, {
          tenant: "bob",
          body: { answers: { [requestId]: { approved: true } } },
        }),
      ).toMatchObject({ status: 404 });

      const key = randomUUID();
      const answer = { answers: { [requestId]: { approved: true } } };
      const first = await call(server, "POST", `/v1/threads/${thread}/answers`, {
        body: answer,
        headers: { "idempotency-key": key },
      });
      expect(first.status).toBe(202);
      expect(first.body.run).toMatchObject({ id: body.run.id, status: "queued" });
      const second = await call(server, "POST", `/v1/threads/${thread}/answers`, {
        body: answer,
        headers: { "idempotency-key": key },
      });
      expect(second).toEqual(first);
      const events = await readEvents(
        server,
        thread,
        (event) => event.event === "run-status" && event.data.status === "completed",
        {
          after: paused.at(-1)!.id,
        },
      );
      expect(events.find((event) => event.event === "run-end")!.data.answer).toBe("Sent 5 euros to bob.");
      const third = await call(server, "POST", `/v1/threads/${thread}/answers`, {
        body: answer,
        headers: { "idempotency-key": key },
      });
      expect(third).toEqual(first);
      expect((await transfers()).length - before).toBe(1);
      expect(
        await call(server, "POST", `/v1/threads/${thread}/answers`, {
          body: { answers: { other: { approved: true } } },
          headers: { "idempotency-key": key },
        }),
      ).toMatchObject({ status: 409, body: { error: { code: "idempotency-key-reused" } } });
    });

    it("cancels a paused run (another tenant cannot), freeing the thread", async () => {
      replies.push(code(TRANSFER));
      const before = (await transfers()).length;
      const thread = await newThread();
      const { body } = await call(server, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Send bob 5." },
      });
      await readEvents(server, thread, runSettles);
      const path = `/v1/threads/${thread}/runs/${body.run.id}/cancel`;
      expect((await call(server, "POST", path, { tenant: "bob" })).status).toBe(404);
      const cancelled = await call(server, "POST", path);
      expect(cancelled).toMatchObject({ status: 202, body: { run: { status: "cancelled" } } });
      expect((await call(server, "GET", `/v1/threads/${thread}`)).body).toMatchObject({
        status: "idle",
        pending: [],
      });
      expect((await transfers()).length).toBe(before);
    });

    it("pages the thread list with ?before=<threadId>; a thread the tenant does not have is 400 before-unknown", async () => {
      const older = await newThread();
      const newer = await newThread();
      const page = await call(server, "GET", `/v1/threads?limit=1&before=${newer}`);
      expect(page.body.threads.map((thread: { id: string }) => thread.id)).toEqual([older]);
      for (const [tenant, before] of [
        ["alice", `never-${randomUUID()}`],
        // Another tenant's thread is unknown too: its existence is not revealed.
        ["bob", newer],
      ] as const) {
        const refused = await call(server, "GET", `/v1/threads?before=${before}`, { tenant });
        expect(refused).toMatchObject({ status: 400, body: { error: { code: "before-unknown" } } });
        expect(refused.body.error.message).toContain(`"${before}"`);
      }
    });

    it("answers a cancel of a run that ended with 409 run-finished and leaves the run as it was", async () => {
      replies.push({ content: "Nothing to do." });
      const thread = await newThread();
      const { body } = await call(server, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Hello." },
      });
      await readEvents(server, thread, runSettles);
      const path = `/v1/threads/${thread}/runs/${body.run.id}`;
      const finished = (await call(server, "GET", path)).body.run;
      expect(finished.status).toBe("completed");
      const refused = await call(server, "POST", `${path}/cancel`);
      expect(refused).toMatchObject({ status: 409, body: { error: { code: "run-finished" } } });
      expect(refused.body.error.message).toContain("completed");
      expect((await call(server, "GET", path)).body.run).toEqual(finished);
      expect((await call(server, "POST", `${path}/cancel`, { tenant: "bob" })).status).toBe(404);
    });

    it("deletes a thread with its runs, events, pending requests and stored context; its open streams end; 404 for another tenant and the second time", async () => {
      replies.push(code(TRANSFER));
      const before = (await transfers()).length;
      const thread = await newThread();
      const { body } = await call(server, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Send bob 5." },
      });
      await readEvents(server, thread, runSettles);
      const session = `alice/${thread}`;
      const rows = async () => {
        const count = async (sql: string, parameter: string) =>
          (await server.database.query<{ count: number }>(sql, [parameter]))[0]!.count;
        return {
          contexts: await count(
            "SELECT count(*)::integer AS count FROM moss_contexts WHERE session_id = $1",
            session,
          ),
          conversations: await count(
            "SELECT count(*)::integer AS count FROM moss_conversations WHERE session_id = $1",
            session,
          ),
          runs: await count("SELECT count(*)::integer AS count FROM moss_runs WHERE thread_id = $1", thread),
          events: await count(
            "SELECT count(*)::integer AS count FROM moss_events WHERE thread_id = $1",
            thread,
          ),
          pending: await count(
            "SELECT count(*)::integer AS count FROM moss_pending_requests WHERE run_id = $1",
            body.run.id,
          ),
        };
      };
      expect(Object.values(await rows()).every((count) => count > 0)).toBe(true);

      // A stream open on the thread ends when the thread goes.
      const stream = await fetch(`${server.url}/v1/threads/${thread}/events`, {
        headers: { authorization: `Bearer ${TOKENS.alice}`, accept: "text/event-stream" },
      });
      const streamEnded = readSse(stream, () => false);

      expect(await call(server, "DELETE", `/v1/threads/${thread}`, { tenant: "bob" })).toMatchObject({
        status: 404,
        body: { error: { code: "thread-not-found" } },
      });
      expect(await call(server, "DELETE", `/v1/threads/${thread}`)).toEqual({ status: 204, body: undefined });
      expect(await streamEnded).toBe(false);
      expect(await rows()).toEqual({ contexts: 0, conversations: 0, runs: 0, events: 0, pending: 0 });
      // Everything about the thread, its runs included, says the thread is gone (not that a run is): a client
      // holding a run id learns to stop asking, on the native API as on AG-UI.
      for (const [method, path, payload] of [
        ["GET", `/v1/threads/${thread}`, undefined],
        ["GET", `/v1/threads/${thread}/events`, undefined],
        ["GET", `/v1/threads/${thread}/runs/${body.run.id}`, undefined],
        ["POST", `/v1/threads/${thread}/runs/${body.run.id}/cancel`, undefined],
        ["POST", `/v1/threads/${thread}/answers`, { answers: { r1: { approved: true } } }],
        ["DELETE", `/v1/threads/${thread}`, undefined],
      ] as const) {
        const answer = await call(server, method, path, payload === undefined ? {} : { body: payload });
        expect(answer.status, `${method} ${path}`).toBe(404);
        expect(answer.body?.error?.code, `${method} ${path}`).toBe("thread-not-found");
      }
      const aguiResume = await fetch(`${server.url}/v1/agui`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${TOKENS.alice}`,
          "content-type": "application/json",
          "last-event-id": `${body.run.id}:1:0:0`,
        },
        body: JSON.stringify({ threadId: thread, runId: "r", messages: [] }),
      });
      expect({ status: aguiResume.status, body: await aguiResume.json() }).toMatchObject({
        status: 404,
        body: { error: { code: "thread-not-found" } },
      });
      const listed = await call(server, "GET", "/v1/threads?limit=500");
      expect(listed.body.threads.map((item: { id: string }) => item.id)).not.toContain(thread);
      expect((await transfers()).length).toBe(before);
      // The id is free again: a new thread under it starts empty.
      expect((await call(server, "POST", "/v1/threads", { body: { id: thread } })).status).toBe(201);
      expect((await call(server, "GET", `/v1/threads/${thread}`)).body).toMatchObject({
        status: "idle",
        lastEventId: 0,
      });
      // The thread is there again, the old run is not: now it is the run that is not found.
      for (const [method, path] of [
        ["GET", `/v1/threads/${thread}/runs/${body.run.id}`],
        ["POST", `/v1/threads/${thread}/runs/${body.run.id}/cancel`],
      ] as const) {
        const answer = await call(server, method, path);
        expect(answer, `${method} ${path}`).toMatchObject({
          status: 404,
          body: { error: { code: "run-not-found" } },
        });
      }
    });

    it("forgets a deleted thread's Idempotency-Keys: the same key on a new thread of that id applies its answer", async () => {
      const before = (await transfers()).length;
      const thread = await newThread();
      const key = `key-${randomUUID()}`;
      const approveOnce = async () => {
        replies.push(code(TRANSFER), { content: "Sent." });
        const started = await call(server, "POST", `/v1/threads/${thread}/runs`, {
          body: { message: "Send bob 5." },
        });
        await readEvents(server, thread, runSettles);
        const { pending } = (await call(server, "GET", `/v1/threads/${thread}`)).body;
        const answered = await call(server, "POST", `/v1/threads/${thread}/answers`, {
          body: { answers: { [pending[0].id]: { approved: true } } },
          headers: { "idempotency-key": key },
        });
        // A remembered key would answer with the deleted thread's run instead of resuming this one.
        expect(answered).toMatchObject({ status: 202, body: { run: { id: started.body.run.id } } });
        await readEvents(
          server,
          thread,
          (event) => event.event === "run-status" && event.data.status === "completed",
        );
        return started.body.run.id as string;
      };
      const first = await approveOnce();
      expect((await call(server, "DELETE", `/v1/threads/${thread}`)).status).toBe(204);
      expect((await call(server, "POST", "/v1/threads", { body: { id: thread } })).status).toBe(201);
      const second = await approveOnce();
      expect(second).not.toBe(first);
      expect((await transfers()).length - before).toBe(2);
    });

    it("refuses to delete a thread while a worker runs its run (409 thread-busy); once cancelled it can go", async () => {
      let release = () => {};
      const hold = new Promise<void>((resolve) => {
        release = resolve;
      });
      replies.push({ content: "Too late.", hold });
      const thread = await newThread();
      const asked = model.requests.length;
      const { body } = await call(server, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Take your time." },
      });
      try {
        // The run is running once the model was asked (its answer is held, so the cancel finds it mid-run).
        while (model.requests.length === asked) await new Promise((resolve) => setTimeout(resolve, 20));
        expect((await call(server, "GET", `/v1/threads/${thread}/runs/${body.run.id}`)).body.run.status).toBe(
          "running",
        );
        const refused = await call(server, "DELETE", `/v1/threads/${thread}`);
        expect(refused).toMatchObject({ status: 409, body: { error: { code: "thread-busy" } } });
        expect(refused.body.error.message).toContain(`/runs/${body.run.id}/cancel`);
        expect((await call(server, "GET", `/v1/threads/${thread}`)).status).toBe(200);
        expect((await call(server, "POST", `/v1/threads/${thread}/runs/${body.run.id}/cancel`)).status).toBe(
          202,
        );
        await readEvents(
          server,
          thread,
          (event) => event.event === "run-status" && event.data.status === "cancelled",
        );
      } finally {
        release();
      }
      expect((await call(server, "DELETE", `/v1/threads/${thread}`)).status).toBe(204);
    });

    it("limits a tenant's active runs (429 too-many-runs) without touching other tenants", async () => {
      replies.push(code(TRANSFER));
      const first = await newThread("bob");
      const second = await newThread("bob");
      const { body } = await call(server, "POST", `/v1/threads/${first}/runs`, {
        tenant: "bob",
        body: { message: "Send bob 5." },
      });
      await readEvents(server, first, runSettles, { tenant: "bob" });
      const refused = await call(server, "POST", `/v1/threads/${second}/runs`, {
        tenant: "bob",
        body: { message: "More." },
      });
      expect(refused).toMatchObject({ status: 429, body: { error: { code: "too-many-runs" } } });
      expect(refused.body.error.message).toContain("maxActiveRuns 1");
      expect((await call(server, "GET", `/v1/threads/${second}`, { tenant: "bob" })).body.lastEventId).toBe(
        0,
      );
      expect(
        (await call(server, "POST", `/v1/threads/${first}/runs/${body.run.id}/cancel`, { tenant: "bob" }))
          .status,
      ).toBe(202);
    });

    it("refuses bad input with a clear 4xx and loses nothing", async () => {
      const thread = await newThread();
      const malformed = await call(server, "POST", `/v1/threads/${thread}/runs`, {
        raw: '{"message": "hi",',
      });
      expect(malformed.status).toBe(400);
      expect(malformed.body.error.code).toBe("json-invalid");
      expect(malformed.body.error.message).toMatch(/not valid JSON: .*JSON/);
      expect(
        await call(server, "POST", `/v1/threads/${thread}/runs`, { body: { message: 42 } }),
      ).toMatchObject({
        status: 400,
        body: { error: { code: "message-invalid" } },
      });
      const huge = await call(server, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "x".repeat(2_000_000) },
      });
      expect(huge).toMatchObject({ status: 413, body: { error: { code: "body-too-large" } } });
      expect(await call(server, "POST", "/v1/threads", { body: { id: "../etc" } })).toMatchObject({
        status: 400,
        body: { error: { code: "thread-id-invalid" } },
      });
      expect(await call(server, "GET", `/v1/threads/${thread}/events?after=abc`)).toMatchObject({
        status: 400,
        body: { error: { code: "event-id-invalid" } },
      });
      expect(await call(server, "GET", `/v1/threads/${thread}/events?after=99`)).toMatchObject({
        status: 400,
        body: { error: { code: "event-id-unknown" } },
      });
      expect(await call(server, "GET", `/v1/threads/${thread}/runs/nope`)).toMatchObject({ status: 404 });
      expect(await call(server, "GET", "/v1/nothing-here")).toMatchObject({
        status: 404,
        body: { error: { code: "not-found" } },
      });
      // Nothing of the refused requests was stored.
      expect((await call(server, "GET", `/v1/threads/${thread}`)).body).toMatchObject({
        status: "idle",
        lastEventId: 0,
      });
    });
  });
}

suite("PGlite", () => pgliteSuiteDatabase("moss-serve-pglite-"));

describe.runIf(POSTGRES_TESTS)("PostgreSQL", () => {
  suite("PostgreSQL", async () => {
    const postgres: PostgresDatabase = await createPostgresDatabase();
    return { location: { url: postgres.url }, end: () => postgres.drop() };
  });
});
