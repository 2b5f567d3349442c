// Attacks on `moss serve`'s answers (issue 23 §1, §3): an answer approves one request of one run. A hostile or
// confused client replays an Approve given for another run, a finished run or a pause the run went past; the
// native API, AG-UI's resume, moss-ts/client and the playground's answer must approve nothing with it. Also AG-UI's
// Last-Event-ID, read as the native API reads event ids. Real HTTP, a real worker, on PGlite and PostgreSQL.
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  AnsweredClarifications,
  type ClarificationMessage,
  type PublishedMessage,
  RequestHandler,
  ResponseStreamHandler,
} from "../../client/index.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { MossServer } from "../../engine/server/moss-server.ts";
import type { DatabaseLocation } from "../../engine/server/store/database.ts";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { pgliteSuiteDatabase } from "../helpers/fresh-pglite.ts";
import { createPostgresDatabase, type PostgresDatabase } from "../helpers/postgres-database.ts";
import { POSTGRES_TESTS } from "../helpers/postgres-server.ts";
import { call, code, readEvents, readSse, runSettles, startTestServer, TOKENS } from "./server-harness.ts";

/** Model code that sends `amount` euros to `to` (an @approval call: the run pauses for a person's yes). */
const transfer = (to: string, amount: number) =>
  code(
    `  const receipt = await moss.vault.transfer(${JSON.stringify(to)}, ${amount});\n  console.log("sent", receipt);`,
  );

/** Model code that asks a question and makes a transfer in one turn: both wait for a person together. */
const askAndTransfer = (to: string, amount: number) =>
  code(
    `  const [color, receipt] = await Promise.all([\n    moss.ask("Which color?", { choices: ["red", "blue"] }),\n    moss.vault.transfer(${JSON.stringify(to)}, ${amount}),\n  ]);\n  console.log(color, receipt);`,
  );

function suite(name: string, locate: () => Promise<{ location: DatabaseLocation; end(): Promise<void> }>) {
  describe(`answers cross no run, on ${name}`, () => {
    const replies: FakeReply[] = [];
    let model: FakeOpenAIServer;
    let server: MossServer;
    let place: { location: DatabaseLocation; end(): Promise<void> };
    let directory: string;

    beforeAll(async () => {
      directory = await mkdtemp(join(tmpdir(), "moss-attacks-answers-"));
      process.env.MOSS_VAULT_LOG = join(directory, "vault.log");
      place = await locate();
      model = await startFakeOpenAIServer(replies);
      server = await startTestServer(place.location, model.baseUrl);
    }, 60_000);
    /** The threads of the test that runs: after it, none may still take the next test's replies. */
    const threads: string[] = [];
    afterEach(async () => {
      // A run an attack got through (before the fix) goes on asking the model: it ends on replies of its own.
      for (let reply = 0; reply < 4; reply++) replies.push({ content: "Done." });
      for (const thread of threads.splice(0)) {
        for (let attempt = 0; attempt < 100; attempt++) {
          const state = await call(server, "GET", `/v1/threads/${thread}`);
          if (state.body?.status !== "running") break;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
      // The fake model answers by position: drop what no run asked for, so the next test's replies come next.
      replies.length = model.requests.filter((request) => request.path === "/v1/chat/completions").length;
    });
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
    const newThread = async () => {
      const id = `attack-${randomUUID()}`;
      expect((await call(server, "POST", "/v1/threads", { body: { id } })).status).toBe(201);
      threads.push(id);
      return id;
    };
    const lastEventId = async (thread: string) =>
      (await call(server, "GET", `/v1/threads/${thread}`)).body.lastEventId as number;
    /** Posts a message and waits until its run settles; resolves the run id and the ids of the requests it waits for. */
    const runToPause = async (thread: string, message: string) => {
      const after = await lastEventId(thread);
      const created = await call(server, "POST", `/v1/threads/${thread}/runs`, { body: { message } });
      expect(created.status).toBe(202);
      const events = await readEvents(server, thread, runSettles, { after });
      const settled = events.at(-1)!.data.run;
      expect({ status: settled.status, error: settled.error }).toEqual({
        status: "pending",
        error: undefined,
      });
      const state = await call(server, "GET", `/v1/threads/${thread}`);
      return {
        runId: created.body.run.id as string,
        requests: state.body.pending as Array<{ id: string; kind: string; args?: unknown[] }>,
      };
    };
    /** Answers and waits for the run to settle again (completed or paused). */
    const answerAndSettle = async (thread: string, answers: Record<string, unknown>) => {
      const after = await lastEventId(thread);
      const posted = await call(server, "POST", `/v1/threads/${thread}/answers`, {
        body: { answers },
        headers: { "idempotency-key": randomUUID() },
      });
      expect(posted.status).toBe(202);
      return readEvents(server, thread, runSettles, { after });
    };
    /** The thread still waits on run `runId` for exactly `ids`, unanswered. */
    const stillWaits = async (thread: string, runId: string, ids: string[]) => {
      const state = await call(server, "GET", `/v1/threads/${thread}`);
      expect(state.body.status).toBe("pending");
      expect(state.body.pending.map((request: { id: string }) => request.id)).toEqual(ids);
      const run = await call(server, "GET", `/v1/threads/${thread}/runs/${runId}`);
      expect(run.body.run.status).toBe("pending");
    };

    it("an Approve sent for a cancelled run's transfer approves nothing of the next run (404 request-unknown)", async () => {
      const thread = await newThread();
      replies.push(transfer("bob", 30));
      const first = await runToPause(thread, "Send bob 30 euros.");
      const cancel = await call(server, "POST", `/v1/threads/${thread}/runs/${first.runId}/cancel`);
      expect(cancel.status).toBe(202);
      replies.push(transfer("mallory", 500));
      const second = await runToPause(thread, "Send mallory 500 euros.");
      expect(second.requests[0]!.args).toEqual(["mallory", 500]);
      // A request id names one request of one run: never the same in two runs of the thread.
      expect(second.requests[0]!.id).not.toBe(first.requests[0]!.id);

      const stale = await call(server, "POST", `/v1/threads/${thread}/answers`, {
        body: { answers: { [first.requests[0]!.id]: { approved: true } } },
      });
      expect(stale).toMatchObject({ status: 404, body: { error: { code: "request-unknown" } } });
      await stillWaits(thread, second.runId, [second.requests[0]!.id]);
      expect(await transfers()).not.toContain("mallory 500");
    });

    it("a retried Approve of a finished run approves nothing of the thread's next run", async () => {
      const thread = await newThread();
      replies.push(transfer("bob", 7), { content: "Sent." });
      const first = await runToPause(thread, "Send bob 7 euros.");
      const answer = { [first.requests[0]!.id]: { approved: true } };
      const done = await answerAndSettle(thread, answer);
      expect(done.at(-1)!.data.status).toBe("completed");
      replies.push(transfer("mallory", 501));
      const second = await runToPause(thread, "Send mallory 501 euros.");
      // The same post again (a client's retry under a new Idempotency-Key): run 1 is over, it answers nothing.
      const retried = await call(server, "POST", `/v1/threads/${thread}/answers`, {
        body: { answers: answer },
        headers: { "idempotency-key": randomUUID() },
      });
      expect(retried).toMatchObject({ status: 404, body: { error: { code: "request-unknown" } } });
      await stillWaits(thread, second.runId, [second.requests[0]!.id]);
      expect(await transfers()).toContain("bob 7");
      expect(await transfers()).not.toContain("mallory 501");
    });

    it("an answer to a pause the run went past approves nothing of the run's next pause", async () => {
      const thread = await newThread();
      // One run, two steps: each step's code pauses at the same call.
      replies.push(transfer("bob", 8), transfer("mallory", 502));
      const run = await runToPause(thread, "Send bob 8, then mallory 502.");
      const firstAnswer = { [run.requests[0]!.id]: { approved: true } };
      const next = await answerAndSettle(thread, firstAnswer);
      expect(next.at(-1)!.data.status).toBe("pending");
      const state = await call(server, "GET", `/v1/threads/${thread}`);
      const waiting = state.body.pending as Array<{ id: string; args: unknown[] }>;
      expect(waiting.map((request) => request.args)).toEqual([["mallory", 502]]);
      expect(waiting[0]!.id).not.toBe(run.requests[0]!.id);
      const superseded = await call(server, "POST", `/v1/threads/${thread}/answers`, {
        body: { answers: firstAnswer },
        headers: { "idempotency-key": randomUUID() },
      });
      expect(superseded).toMatchObject({ status: 404, body: { error: { code: "request-unknown" } } });
      await stillWaits(thread, run.runId, [waiting[0]!.id]);
      expect(await transfers()).toContain("bob 8");
      expect(await transfers()).not.toContain("mallory 502");
      await call(server, "POST", `/v1/threads/${thread}/runs/${run.runId}/cancel`);
    });

    it("an answer that names the run it was given for applies to no other run (the playground's answers name theirs)", async () => {
      const thread = await newThread();
      replies.push(transfer("bob", 9));
      const first = await runToPause(thread, "Send bob 9 euros.");
      await call(server, "POST", `/v1/threads/${thread}/runs/${first.runId}/cancel`);
      replies.push(transfer("mallory", 503));
      const second = await runToPause(thread, "Send mallory 503 euros.");
      const other = await call(server, "POST", `/v1/threads/${thread}/answers`, {
        body: { runId: first.runId, answers: { [second.requests[0]!.id]: { approved: true } } },
      });
      expect(other).toMatchObject({ status: 404, body: { error: { code: "request-unknown" } } });
      await stillWaits(thread, second.runId, [second.requests[0]!.id]);
      // Named right, it applies.
      replies.push({ content: "Not sent." });
      const after = await lastEventId(thread);
      const right = await call(server, "POST", `/v1/threads/${thread}/answers`, {
        body: { runId: second.runId, answers: { [second.requests[0]!.id]: { approved: false } } },
      });
      expect(right.status).toBe(202);
      await readEvents(server, thread, runSettles, { after });
      expect(await transfers()).not.toContain("mallory 503");
    });

    it("AG-UI: a resume entry for another run's interrupt is RUN_ERROR request-unknown and approves nothing", async () => {
      const thread = await newThread();
      replies.push(transfer("bob", 10));
      const first = await runToPause(thread, "Send bob 10 euros.");
      await call(server, "POST", `/v1/threads/${thread}/runs/${first.runId}/cancel`);
      replies.push(transfer("mallory", 504));
      const second = await runToPause(thread, "Send mallory 504 euros.");
      const response = await fetch(`${server.url}/v1/agui`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${TOKENS.alice}`,
          "content-type": "application/json",
          accept: "text/event-stream",
        },
        body: JSON.stringify({
          threadId: thread,
          runId: randomUUID(),
          messages: [],
          resume: [{ interruptId: first.requests[0]!.id, status: "resolved", payload: { approved: true } }],
        }),
      });
      const events: any[] = [];
      await readSse(response, (message) => {
        events.push(JSON.parse(message.data));
        return false;
      });
      expect(events).toEqual([expect.objectContaining({ type: "RUN_ERROR", code: "request-unknown" })]);
      await stillWaits(thread, second.runId, [second.requests[0]!.id]);
      expect(await transfers()).not.toContain("mallory 504");
      await call(server, "POST", `/v1/threads/${thread}/runs/${second.runId}/cancel`);
    });

    describe("moss-ts/client", () => {
      /** A PluginPort that records what the app was shown. */
      const port = () => {
        const messages: PublishedMessage[] = [];
        return {
          messages,
          handler: new ResponseStreamHandler({
            connectionStarted() {},
            publishMessage(message) {
              messages.push(message);
            },
            connectionFinished() {},
          }),
        };
      };
      const clarifications = (messages: PublishedMessage[]) =>
        messages.filter((message): message is ClarificationMessage => message.type === "clarification");

      it("run 1 approved, run 2 asks a question and a transfer: answering only the question does not approve the transfer", async () => {
        const threadId = `crew-${randomUUID()}`;
        threads.push(threadId);
        const request = new RequestHandler({ bearerToken: TOKENS.alice, serverUrl: server.url!, threadId });
        const answered = new AnsweredClarifications();
        // The app records answers as the README shows: by the message text, with the request's id.
        const record = (messages: PublishedMessage[], approval: string, choice: string) => {
          for (const message of clarifications(messages)) {
            if (message.kind === "approval")
              answered.add(approval, { requestId: message.requestId, approved: true });
            else answered.add(choice, { requestId: message.requestId, answer: choice });
          }
        };

        replies.push(askAndTransfer("bob", 11), { content: "Done." });
        const first = port();
        await request.newRequest([{ role: "user", content: "Pay bob 11." }], first.handler, answered);
        expect(clarifications(first.messages)).toHaveLength(2);
        record(first.messages, "Approve", "red");
        const resumed = port();
        await request.newRequest([{ role: "user", content: "Approve" }], resumed.handler, answered);
        expect(resumed.messages.find((message) => message.type === "answer")).toMatchObject({
          content: "Done.",
        });
        expect(await transfers()).toContain("bob 11");

        replies.push(askAndTransfer("mallory", 505));
        const second = port();
        await request.newRequest([{ role: "user", content: "Pay mallory 505." }], second.handler, answered);
        const asked = clarifications(second.messages);
        expect(asked.map((message) => message.kind).sort()).toEqual(["approval", "question"]);
        const question = asked.find((message) => message.kind === "question")!;
        const approval = asked.find((message) => message.kind === "approval")!;
        // The user answers only the question; the "Approve" recorded in run 1 stays with run 1's request.
        answered.add("blue", { requestId: question.requestId, answer: "blue" });
        const reply = port();
        await request.newRequest([{ role: "user", content: "blue" }], reply.handler, answered);
        expect(reply.messages.filter((message) => message.type === "error")).toEqual([]);
        const state = await call(server, "GET", `/v1/threads/${threadId}`);
        expect(state.body.status).toBe("pending");
        expect(state.body.pending.map((pending: { id: string }) => pending.id)).toEqual([approval.requestId]);
        expect(await transfers()).not.toContain("mallory 505");
        await request.cancel();
      });

      it("an answer recorded for run 1's request is not sent for run 2's, even as the message the user sends", async () => {
        const threadId = `crew-${randomUUID()}`;
        threads.push(threadId);
        const request = new RequestHandler({ bearerToken: TOKENS.alice, serverUrl: server.url!, threadId });
        const answered = new AnsweredClarifications();
        replies.push(transfer("bob", 12));
        const first = port();
        await request.newRequest([{ role: "user", content: "Pay bob 12." }], first.handler, answered);
        const asked = clarifications(first.messages)[0]!;
        const firstRun = request.runId!;
        answered.add("Approve", { runId: firstRun, requestId: asked.requestId, approved: true });
        await request.cancel();
        replies.push(transfer("mallory", 506));
        const second = port();
        await request.newRequest([{ role: "user", content: "Pay mallory 506." }], second.handler, answered);
        const waiting = request.runId!;
        // The old button is pressed: its answer was for run 1, which waits for nothing.
        const pressed = port();
        await request.newRequest([{ role: "user", content: "Approve" }], pressed.handler, answered);
        expect(pressed.messages).toEqual([
          expect.objectContaining({ type: "error", code: "request-unknown" }),
        ]);
        const run = await call(server, "GET", `/v1/threads/${threadId}/runs/${waiting}`);
        expect(run.body.run.status).toBe("pending");
        expect(await transfers()).not.toContain("mallory 506");
        // A clarification names its run, for the app to record with the answer.
        expect(asked.runId).toBe(firstRun);
        await call(server, "POST", `/v1/threads/${threadId}/runs/${waiting}/cancel`);
      });
    });

    describe("AG-UI Last-Event-ID, read as the native API reads event ids", () => {
      const agui = (threadId: string, lastEventId: string) =>
        fetch(`${server.url}/v1/agui`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${TOKENS.alice}`,
            "content-type": "application/json",
            accept: "text/event-stream",
            "last-event-id": lastEventId,
          },
          body: JSON.stringify({ threadId, runId: randomUUID(), messages: [] }),
          signal: AbortSignal.timeout(20_000),
        });

      it("an id beyond the thread's last event is 400 event-id-unknown, not a stream that never ends", async () => {
        const thread = await newThread();
        replies.push({ content: "Hello." });
        const after = await lastEventId(thread);
        const created = await call(server, "POST", `/v1/threads/${thread}/runs`, { body: { message: "Hi" } });
        await readEvents(server, thread, runSettles, { after });
        const last = await lastEventId(thread);
        const response = await agui(thread, `${created.body.run.id}:${last + 5}:${last + 5}:0`);
        expect(response.status).toBe(400);
        expect(((await response.json()) as any).error.code).toBe("event-id-unknown");
        const ahead = await agui(thread, `${created.body.run.id}:0:${last + 1}:0`);
        expect(ahead.status).toBe(400);
        expect(((await ahead.json()) as any).error.code).toBe("event-id-unknown");
      });

      it("an id past the integer range is 400 event-id-invalid, not a stream that closes silently", async () => {
        const thread = await newThread();
        replies.push({ content: "Hello." });
        const after = await lastEventId(thread);
        const created = await call(server, "POST", `/v1/threads/${thread}/runs`, { body: { message: "Hi" } });
        await readEvents(server, thread, runSettles, { after });
        for (const id of [
          `${created.body.run.id}:99999999999999999999:0:0`,
          `${created.body.run.id}:0:0:99999999999999999999`,
        ]) {
          const response = await agui(thread, id);
          expect(response.status).toBe(400);
          expect(((await response.json()) as any).error.code).toBe("event-id-invalid");
        }
      });
    });
  });
}

suite("PGlite", () => pgliteSuiteDatabase("moss-attacks-answers-pglite-"));

describe.runIf(POSTGRES_TESTS)("PostgreSQL", () => {
  suite("PostgreSQL", async () => {
    const postgres: PostgresDatabase = await createPostgresDatabase();
    return { location: { url: postgres.url }, end: () => postgres.drop() };
  });
});
