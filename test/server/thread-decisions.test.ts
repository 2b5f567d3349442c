// Issue 26 on the server (PGlite; PostgreSQL with MOSS_TEST_POSTGRES=1): approvals a person can judge (parameters, doc), the decision recorded in the
// thread as an `answer` event (streamed, replayed after a reload, redacted, tenant-scoped), the deny reason reaching
// the code's ApprovalDenied, and renaming a thread with PATCH /v1/threads/:id.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { MAX_METADATA_BYTES } from "../../engine/server/answer-bounds.ts";
import type { MossServer } from "../../engine/server/moss-server.ts";
import type { DatabaseLocation } from "../../engine/server/store/database.ts";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { pgliteSuiteDatabase } from "../helpers/fresh-pglite.ts";
import { createPostgresDatabase } from "../helpers/postgres-database.ts";
import { POSTGRES_TESTS } from "../helpers/postgres-server.ts";
import { call, code, readEvents, runSettles, startTestServer, TOKENS, TRANSFER } from "./server-harness.ts";

const DENIED =
  '  try {\n    await moss.vault.transfer("bob", 5);\n  } catch (error) {\n    const e = error as Error & { reason?: string };\n    console.log("refused:", e.name, e.reason);\n  }';
const ASK =
  '  const color = await moss.ask("Which color?", { choices: ["red", "blue"] });\n  console.log("color", color);';

type Place = { location: DatabaseLocation; end(): Promise<void> };

function suite(name: string, locate: () => Promise<Place>) {
  describe(`decisions and names of threads on ${name}`, () => {
    const vault = { replies: [] as FakeReply[] } as { replies: FakeReply[]; server: MossServer };
    let model: FakeOpenAIServer;
    let place: Place;
    let directory: string;
    beforeAll(async () => {
      directory = await mkdtemp(join(tmpdir(), "moss-decisions-"));
      process.env.MOSS_VAULT_LOG = join(directory, "vault.log");
      place = await locate();
      model = await startFakeOpenAIServer(vault.replies);
      vault.server = await startTestServer(place.location, model.baseUrl);
    }, 60_000);
    afterAll(async () => {
      await vault.server?.close(1_000);
      await model?.close();
      await place?.end();
      await closeSharedSandboxes();
      await rm(directory, { recursive: true, force: true });
      delete process.env.MOSS_VAULT_LOG;
    });
    const newThread = async () => {
      const created = await call(vault.server, "POST", "/v1/threads", {
        body: { id: `t-${randomUUID()}`, metadata: { title: "first" } },
      });
      expect(created.status).toBe(201);
      return created.body.thread.id as string;
    };
    const pause = async (thread: string, body: string) => {
      vault.replies.push(code(body), { content: "Done." });
      const started = await call(vault.server, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Go." },
      });
      expect(started.status).toBe(202);
      const events = await readEvents(vault.server, thread, runSettles);
      expect(events.at(-1)!.data.status).toBe("pending");
      return { runId: started.body.run.id as string, events };
    };

    it("an approval request names the member's parameters and carries its doc, in the event and the thread's state", async () => {
      const thread = await newThread();
      const { events } = await pause(thread, TRANSFER);
      const request = events.find((event) => event.event === "approval-request")!.data.request;
      expect(request).toMatchObject({
        service: "vault",
        member: "transfer",
        args: ["bob", 5],
        parameters: ["to", "amount"],
        doc: "Sends `amount` euros to `to` and returns the receipt number.\n@approval",
      });
      const state = await call(vault.server, "GET", `/v1/threads/${thread}`);
      expect(state.body.pending[0]).toMatchObject({ parameters: ["to", "amount"], doc: request.doc });
      expect(
        (
          await call(vault.server, "POST", `/v1/threads/${thread}/answers`, {
            body: { answers: { [request.id]: { approved: true } } },
          })
        ).status,
      ).toBe(202);
      await readEvents(
        vault.server,
        thread,
        (event) => event.event === "run-status" && event.data.status === "completed",
        { after: events.at(-1)!.id },
      );
    });

    it("a denial is recorded as an answer event (who, when, the reason), its reason reaches ApprovalDenied, and a reload replays it", async () => {
      const thread = await newThread();
      const { runId, events } = await pause(thread, DENIED);
      const requestId = events.find((event) => event.event === "approval-request")!.data.request.id as string;
      // Another tenant cannot answer, and records nothing in the thread.
      expect(
        await call(vault.server, "POST", `/v1/threads/${thread}/answers`, {
          tenant: "bob",
          body: { answers: { [requestId]: { approved: false, reason: "bob says no" } } },
        }),
      ).toMatchObject({ status: 404, body: { error: { code: "thread-not-found" } } });
      const before = Date.now();
      const answered = await call(vault.server, "POST", `/v1/threads/${thread}/answers`, {
        body: { answers: { [requestId]: { approved: false, reason: "too much today" } } },
      });
      expect(answered.status).toBe(202);
      const rest = await readEvents(vault.server, thread, runSettles, { after: events.at(-1)!.id });
      const decision = rest.find((event) => event.event === "answer");
      expect(decision?.data).toEqual({
        type: "answer",
        runId,
        requestId,
        kind: "approval",
        approved: false,
        reason: "too much today",
        by: { tenant: "alice" },
        at: expect.any(String),
      });
      expect(Date.parse(decision!.data.at)).toBeGreaterThanOrEqual(before - 1_000);
      expect(rest.filter((event) => event.event === "answer")).toHaveLength(1);
      // The answer comes before the run is queued again; the code read the person's reason.
      expect(rest.findIndex((event) => event.event === "answer")).toBeLessThan(
        rest.findIndex((event) => event.event === "run-status" && event.data.status === "queued"),
      );
      expect(rest.at(-1)!.data.status).toBe("completed");
      const execution = rest.find((event) => event.event === "execution")!.data.execution;
      expect(execution.stdout).toContain("refused: ApprovalDenied too much today");

      // A reload reads the whole thread again: the decision is there, once, with the same id.
      const replayed = await readEvents(vault.server, thread, (event) => event.id === rest.at(-1)!.id);
      expect(replayed.filter((event) => event.event === "answer")).toEqual([decision]);
      // Bob cannot read alice's thread's decisions.
      await expect(readEvents(vault.server, thread, () => true, { tenant: "bob" })).rejects.toThrow(/404/);
    });

    it("an answer's text passes the server's redactor before it is stored; a question's answer is recorded too", async () => {
      const thread = await newThread();
      const { events } = await pause(thread, ASK);
      const requestId = events.find((event) => event.event === "clarification-request")!.data.request.id;
      // A choice is what the code asked for: the text itself is checked against the choices.
      expect(
        (
          await call(vault.server, "POST", `/v1/threads/${thread}/answers`, {
            body: { answers: { [requestId]: { answer: `blue ${TOKENS.bob}` } } },
          })
        ).body.error.code,
      ).toBe("answer-invalid");
      const post = () =>
        call(vault.server, "POST", `/v1/threads/${thread}/answers`, {
          body: { answers: { [requestId]: { answer: "blue" } } },
          headers: { "idempotency-key": `blue-${thread}` },
        });
      const first = await post();
      expect(first.status).toBe(202);
      const rest = await readEvents(vault.server, thread, runSettles, { after: events.at(-1)!.id });
      expect(rest.find((event) => event.event === "answer")!.data).toMatchObject({
        kind: "clarification",
        answer: "blue",
        by: { tenant: "alice" },
      });
      // The same post again under its key applies nothing and records nothing.
      expect(await post()).toEqual(first);
      const all = await readEvents(vault.server, thread, (event) => event.id === rest.at(-1)!.id);
      expect(all.filter((event) => event.event === "answer")).toHaveLength(1);

      const second = await newThread();
      const paused = await pause(second, TRANSFER);
      const id = paused.events.find((event) => event.event === "approval-request")!.data.request.id;
      await call(vault.server, "POST", `/v1/threads/${second}/answers`, {
        body: { answers: { [id]: { approved: false, reason: `bob's token is ${TOKENS.bob}` } } },
      });
      const after = await readEvents(vault.server, second, runSettles, { after: paused.events.at(-1)!.id });
      const reason = after.find((event) => event.event === "answer")!.data.reason as string;
      expect(reason).not.toContain(TOKENS.bob);
      expect(reason).toContain("[redacted]");
    });

    it("PATCH /v1/threads/:id replaces the metadata (a rename), bounded, for the thread's own tenant only", async () => {
      const thread = await newThread();
      const path = `/v1/threads/${thread}`;
      const renamed = await call(vault.server, "PATCH", path, { body: { metadata: { title: "Groceries" } } });
      expect(renamed).toEqual({
        status: 200,
        body: { thread: { id: thread, metadata: { title: "Groceries" }, createdAt: expect.any(String) } },
      });
      expect((await call(vault.server, "GET", path)).body.thread.metadata).toEqual({ title: "Groceries" });
      const listed = await call(vault.server, "GET", "/v1/threads?limit=500");
      expect(listed.body.threads.find((item: { id: string }) => item.id === thread).metadata).toEqual({
        title: "Groceries",
      });

      // Another tenant's thread and a missing one are the same 404; nothing changed.
      expect(
        await call(vault.server, "PATCH", path, { tenant: "bob", body: { metadata: { title: "mine" } } }),
      ).toMatchObject({
        status: 404,
        body: { error: { code: "thread-not-found" } },
      });
      expect(
        await call(vault.server, "PATCH", `/v1/threads/none-${randomUUID()}`, { body: { metadata: {} } }),
      ).toMatchObject({ status: 404, body: { error: { code: "thread-not-found" } } });
      // Too large, malformed, or without an object: refused with the existing codes, nothing changed.
      const big = { title: "x".repeat(MAX_METADATA_BYTES) };
      expect(await call(vault.server, "PATCH", path, { body: { metadata: big } })).toMatchObject({
        status: 413,
        body: { error: { code: "metadata-too-large" } },
      });
      expect(await call(vault.server, "PATCH", path, { raw: "{not json" })).toMatchObject({
        status: 400,
        body: { error: { code: "json-invalid" } },
      });
      for (const body of [{}, { metadata: "Groceries" }, { metadata: ["a"] }]) {
        expect(await call(vault.server, "PATCH", path, { body })).toMatchObject({
          status: 400,
          body: { error: { code: "metadata-invalid" } },
        });
      }
      expect(await call(vault.server, "PATCH", path, { tenant: null, body: { metadata: {} } })).toMatchObject(
        {
          status: 401,
        },
      );
      expect((await call(vault.server, "GET", path)).body.thread.metadata).toEqual({ title: "Groceries" });
    });
  });
}

suite("PGlite", () => pgliteSuiteDatabase("moss-decisions-pglite-"));

describe.runIf(POSTGRES_TESTS)("PostgreSQL", () => {
  suite("PostgreSQL", async () => {
    const postgres = await createPostgresDatabase();
    return { location: { url: postgres.url }, end: () => postgres.drop() };
  });
});
