// moss-ts/client (the Crewmaster protocol) against a real `moss serve` core on PGlite: real HTTP on 127.0.0.1, a
// real worker running the vault module's agent, the fake OpenAI server as the model.
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  AnsweredClarifications,
  FormatType,
  MomentType,
  type PluginPort,
  type PublishedMessage,
  RequestHandler,
  ResponseStreamHandler,
  ScopeType,
} from "../../client/index.ts";
import { code, startTestServer, TOKENS, TRANSFER, useVaultServer } from "../server/server-harness.ts";

const ASK =
  '  const color = await moss.ask("Which color?", { choices: ["red", "blue"] });\n  console.log("color", color);';

/** A PluginPort that records every call in order. */
class RecordingPort implements PluginPort {
  calls: Array<"started" | "finished" | PublishedMessage> = [];
  connectionStarted() {
    this.calls.push("started");
  }
  publishMessage(message: PublishedMessage) {
    this.calls.push(message);
  }
  connectionFinished() {
    this.calls.push("finished");
  }
  get messages(): PublishedMessage[] {
    return this.calls.filter((call): call is PublishedMessage => typeof call === "object");
  }
}

describe("moss-ts/client against moss serve (PGlite)", () => {
  const vault = useVaultServer("moss-client-");
  const { replies, transfers } = vault;
  const handler = (options: Partial<ConstructorParameters<typeof RequestHandler>[0]> = {}) =>
    new RequestHandler({
      bearerToken: TOKENS.alice,
      serverUrl: vault.server.url!,
      threadId: `crew-${randomUUID()}`,
      ...options,
    });
  const send = async (request: RequestHandler, content: string, answered?: AnsweredClarifications) => {
    const port = new RecordingPort();
    const settled = request.newRequest(
      [{ role: "user", content }],
      new ResponseStreamHandler(port),
      answered,
    );
    await settled;
    // The promise settles only after connectionFinished().
    expect(port.calls.at(-1)).toBe("finished");
    return port;
  };

  it("serves the playground at / without a token, under a strict Content-Security-Policy", async () => {
    const page = await fetch(`${vault.server.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(await page.text()).toContain('<script type="module" src="/playground.js">');
    const script = await fetch(`${vault.server.url}/playground.js`);
    expect(script.headers.get("content-type")).toMatch(/^text\/javascript/);
    const text = await script.text();
    // Bundled: eventsource-parser is inlined, no bare import is left for the browser to resolve.
    expect(text).not.toMatch(/from\s*"eventsource-parser"/);
    expect(text).toContain("createParser");
    expect(text).not.toContain("innerHTML");
  });

  it("a Fresh request publishes text, code, execution and the answer, each with a unique string id, between started and finished", async () => {
    replies.push(code('  console.log("balance", await moss.vault.balance());', "Let me check."), {
      content: "You have 100 euros.",
    });
    const port = await send(handler(), "What is my balance?");
    expect(port.calls[0]).toBe("started");
    const messages = port.messages;
    expect(messages.map((message) => message.type)).toEqual([
      "text",
      "text",
      "code",
      "execution",
      "text",
      "text",
      "answer",
    ]);
    expect(messages[0]).toEqual({ id: messages[0]!.id, type: "text", content: "", moment: "start" });
    expect(messages[1]).toEqual({
      id: messages[0]!.id,
      type: "text",
      content: "Let me check.",
      moment: "end",
    });
    expect(messages[2]).toMatchObject({
      type: "code",
      code: expect.stringContaining("moss.vault.balance()"),
    });
    expect(messages[3]).toMatchObject({ type: "execution", ok: true, stdout: "balance 100\n" });
    expect(messages[3]).not.toHaveProperty("error");
    // The model's last prose is published as text (it streams), then as the answer.
    expect(messages[5]).toMatchObject({ type: "text", content: "You have 100 euros.", moment: "end" });
    expect(messages[6]).toEqual({ id: expect.any(String), type: "answer", content: "You have 100 euros." });
    const ids = messages.map((message) => message.id);
    for (const id of ids) expect(typeof id).toBe("string");
    // Start and End of one text share their id; every other message has its own.
    expect(messages[4]!.id).toBe(messages[5]!.id);
    expect(new Set(ids).size).toBe(ids.length - 2);
  });

  it("getTrace() reads the last request's run's host calls with their payloads; another tenant's handler is refused with thread-not-found", async () => {
    replies.push(code('  console.log("balance", await moss.vault.balance());'), {
      content: "You have 100 euros.",
    });
    const threadId = `crew-${randomUUID()}`;
    const request = handler({ threadId });
    await expect(request.getTrace()).rejects.toMatchObject({ code: "run-not-found" });
    await send(request, "What is my balance?");
    const trace = await request.getTrace();
    expect(trace).toMatchObject({ runId: request.runId, status: "completed" });
    expect(trace.executions[0]!.calls).toMatchObject([
      { member: "vault.balance", line: 2, outcome: "value", args: "[]" },
    ]);
    expect(trace.executions[0]!.calls[0]!.result).toMatch(/^\d+$/);
    // Bob's handler on the same thread id: alice's thread is not his to read.
    const bobs = new RequestHandler({ bearerToken: TOKENS.bob, serverUrl: vault.server.url!, threadId });
    await expect(bobs.getTrace(request.runId)).rejects.toMatchObject({ code: "thread-not-found" });
  });

  it("cancel() of a run that ended already leaves it be (the server's 409 run-finished is not a failure of the app)", async () => {
    replies.push({ content: "Done." });
    const threadId = `crew-${randomUUID()}`;
    const request = handler({ threadId });
    const port = await send(request, "Hello.");
    expect(port.messages.at(-1)).toMatchObject({ type: "answer", content: "Done." });
    await expect(request.cancel()).resolves.toBeUndefined();
    const state = await fetch(`${vault.server.url}/v1/threads/${threadId}`, {
      headers: { authorization: `Bearer ${TOKENS.alice}` },
    });
    expect(await state.json()).toMatchObject({ status: "idle" });
  });

  it("cancel() of a run whose thread was deleted leaves it be (404 thread-not-found: the run went with its thread)", async () => {
    replies.push(code(TRANSFER));
    const before = (await transfers()).length;
    const threadId = `crew-${randomUUID()}`;
    const request = handler({ threadId });
    const port = await send(request, "Send bob 5 euros.");
    expect(port.messages.some((message) => message.type === "clarification")).toBe(true);
    const headers = { authorization: `Bearer ${TOKENS.alice}` };
    // The server refuses to delete a thread while a run of it is running (409 thread-busy): a paused one goes with it.
    const deleted = await fetch(`${vault.server.url}/v1/threads/${threadId}`, { method: "DELETE", headers });
    expect(deleted.status).toBe(204);
    await expect(request.cancel()).resolves.toBeUndefined();
    expect((await fetch(`${vault.server.url}/v1/threads/${threadId}`, { headers })).status).toBe(404);
    expect((await transfers()).length).toBe(before);
  });

  it("updateThread({ metadata }) renames the handler's thread; the server's refusals are thrown with their codes", async () => {
    const threadId = `crew-${randomUUID()}`;
    const request = handler({ threadId });
    await expect(request.updateThread({ metadata: { title: "early" } })).rejects.toMatchObject({
      code: "thread-not-found",
      status: 404,
    });
    replies.push({ content: "Hi." });
    await send(request, "Hello.");
    const thread = await request.updateThread({ metadata: { title: "Groceries" } });
    expect(thread).toMatchObject({ id: threadId, metadata: { title: "Groceries" } });
    await expect(request.updateThread({ metadata: { title: "x".repeat(17 * 1024) } })).rejects.toMatchObject({
      code: "metadata-too-large",
      status: 413,
    });
    // Another tenant's handler for the same thread id reaches nothing.
    const bob = handler({ threadId, bearerToken: TOKENS.bob });
    await expect(bob.updateThread({ metadata: { title: "bob's" } })).rejects.toMatchObject({
      code: "thread-not-found",
    });
    const state = await fetch(`${vault.server.url}/v1/threads/${threadId}`, {
      headers: { authorization: `Bearer ${TOKENS.alice}` },
    });
    expect(((await state.json()) as { thread: { metadata: unknown } }).thread.metadata).toEqual({
      title: "Groceries",
    });
  });

  it("an approval is a clarification with Approve/Deny and the call; answering it (Clarification request) resumes the run once", async () => {
    replies.push(code(TRANSFER), { content: "Sent 5 euros to bob." });
    const before = (await transfers()).length;
    const request = handler();
    const first = await send(request, "Send bob 5 euros.");
    const clarification = first.messages.find((message) => message.type === "clarification")!;
    expect(clarification).toMatchObject({
      type: "clarification",
      kind: "approval",
      choices: ["Approve", "Deny"],
      service: "vault",
      member: "transfer",
      args: ["bob", 5],
      // The engine's description of the request, stored with the event (the client writes no question itself).
      question: expect.stringMatching(/^#\S+ approval vault\.transfer\("bob", 5\) at line \d+$/),
    });
    expect(first.messages.some((message) => message.type === "answer")).toBe(false);
    expect((await transfers()).length).toBe(before);

    const answered = new AnsweredClarifications();
    if (clarification.type !== "clarification") throw new Error("unreachable");
    answered.add("Approve", { requestId: clarification.requestId, approved: true });
    const second = await send(request, "Approve", answered);
    expect(second.messages.at(-1)).toMatchObject({ type: "answer", content: "Sent 5 euros to bob." });
    const execution = second.messages.find((message) => message.type === "execution");
    expect(execution).toMatchObject({ ok: true, stdout: expect.stringContaining("sent") });
    expect((await transfers()).length - before).toBe(1);
    // Ids stay unique across the thread's requests.
    expect(second.messages.filter((message) => first.messages.some((m) => m.id === message.id))).toEqual([]);
  });

  it("a denied approval reaches the code as a refusal; nothing is sent", async () => {
    replies.push(code(TRANSFER), { content: "The transfer was refused." });
    const before = (await transfers()).length;
    const request = handler();
    const first = await send(request, "Send bob 5 euros.");
    const clarification = first.messages.find((message) => message.type === "clarification");
    if (clarification?.type !== "clarification") throw new Error("no clarification");
    const answered = new AnsweredClarifications().add("Deny", {
      requestId: clarification.requestId,
      approved: false,
      reason: "not today",
    });
    const second = await send(request, "Deny", answered);
    const execution = second.messages.find((message) => message.type === "execution");
    expect(execution).toMatchObject({ ok: false, error: expect.stringContaining("not today") });
    expect(second.messages.at(-1)).toMatchObject({ type: "answer", content: "The transfer was refused." });
    expect((await transfers()).length).toBe(before);
  });

  it("a thread and its pending clarification survive a restart of the server: the answer resumes the run", async () => {
    const dataDirectory = join(vault.directory, "restart");
    let own = await startTestServer({ dataDirectory }, vault.model.baseUrl);
    try {
      replies.push(code(TRANSFER), { content: "Sent after the restart." });
      const threadId = `crew-${randomUUID()}`;
      const first = await send(
        new RequestHandler({ bearerToken: TOKENS.alice, serverUrl: own.url!, threadId }),
        "Send bob 5.",
      );
      const clarification = first.messages.find((message) => message.type === "clarification");
      if (clarification?.type !== "clarification") throw new Error("no clarification");
      await own.close(1_000);
      own = await startTestServer({ dataDirectory }, vault.model.baseUrl);
      const request = new RequestHandler({ bearerToken: TOKENS.alice, serverUrl: own.url!, threadId });
      const answered = new AnsweredClarifications().add("Approve", {
        requestId: clarification.requestId,
        approved: true,
      });
      const second = await send(request, "Approve", answered);
      expect(second.messages.at(-1)).toMatchObject({ type: "answer", content: "Sent after the restart." });
      const state = (await fetch(`${own.url}/v1/threads/${threadId}`, {
        headers: { authorization: `Bearer ${TOKENS.alice}` },
      }).then((response) => response.json())) as { status: string; pending: unknown[] };
      expect(state).toMatchObject({ status: "idle", pending: [] });
    } finally {
      await own.close(1_000);
    }
  });

  it("moss.ask is a question with the code's choices; the chosen text answers it", async () => {
    replies.push(code(ASK), { content: "Blue it is." });
    const request = handler();
    const first = await send(request, "Pick a color.");
    const question = first.messages.find((message) => message.type === "clarification");
    expect(question).toMatchObject({ kind: "question", question: "Which color?", choices: ["red", "blue"] });
    expect(question).not.toHaveProperty("service");
    if (question?.type !== "clarification") throw new Error("no question");
    const answered = new AnsweredClarifications().add("blue", {
      requestId: question.requestId,
      answer: "blue",
    });
    const second = await send(request, "blue", answered);
    expect(second.messages.find((message) => message.type === "execution")).toMatchObject({
      ok: true,
      stdout: "color blue\n",
    });
    expect(second.messages.at(-1)).toMatchObject({ type: "answer", content: "Blue it is." });
  });

  it("ScopeType.Answer publishes only answer, clarification and error; MomentType.Delta streams the text's pieces", async () => {
    replies.push(code('  console.log("balance", await moss.vault.balance());', "Checking the balance now."), {
      content: "You have 100 euros.",
    });
    const answerOnly = await send(handler({ eventConfig: { scope: ScopeType.Answer } }), "Balance?");
    expect(answerOnly.messages.map((message) => message.type)).toEqual(["answer"]);

    replies.push({ content: "A fairly long answer, streamed in pieces." });
    const deltas = await send(
      handler({ eventConfig: { moments: [MomentType.Delta, MomentType.End], format: FormatType.Verbose } }),
      "Say something.",
    );
    const pieces = deltas.messages.filter((message) => message.type === "text" && message.moment === "delta");
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.map((message) => (message.type === "text" ? message.content : "")).join("")).toBe(
      "A fairly long answer, streamed in pieces.",
    );
    expect(deltas.messages.some((message) => message.type === "text" && message.moment === "start")).toBe(
      false,
    );
    // Verbose carries the run and event ids.
    const end = deltas.messages.find((message) => message.type === "text" && message.moment === "end");
    expect(end).toMatchObject({
      content: "A fairly long answer, streamed in pieces.",
      runId: expect.any(String),
    });
    expect(deltas.messages.at(-1)).toMatchObject({ type: "answer", eventId: expect.any(Number) });
  });

  it("publishes errors (bad token, unknown request, model server down, bad body) then connectionFinished, never throws", async () => {
    const badToken = await send(handler({ bearerToken: "wrong" }), "hello");
    expect(badToken.calls).toEqual([
      {
        id: expect.any(String),
        type: "error",
        code: "unauthorized",
        message: expect.stringContaining("token"),
      },
      "finished",
    ]);

    const unknown = new AnsweredClarifications().add("Approve", { requestId: "r9", approved: true });
    const unknownRequest = await send(handler(), "Approve", unknown);
    expect(unknownRequest.messages).toEqual([
      expect.objectContaining({ type: "error", code: "request-unknown" }),
    ]);

    replies.push({ status: 503, error: { message: "the model server is down" } });
    const down = await send(handler(), "hello");
    expect(down.calls[0]).toBe("started");
    const errors = down.messages.filter((message) => message.type === "error");
    expect(errors.length).toBe(1);
    // What the model server said is the operator's (issue 23 §4): the client reads the stable failure.
    expect(errors[0]).toMatchObject({
      code: "model-unavailable",
      message: "The model is unavailable; try again later.",
    });

    const unreachable = await send(handler({ serverUrl: "http://127.0.0.1:1" }), "hello");
    expect(unreachable.messages).toEqual([
      expect.objectContaining({ type: "error", code: "server-unreachable" }),
    ]);

    const port = new RecordingPort();
    await handler().newRequest([{ role: "assistant", content: "hi" }], new ResponseStreamHandler(port));
    expect(port.calls).toEqual([
      expect.objectContaining({ type: "error", code: "body-invalid" }),
      "finished",
    ]);

    // Every published message's id is unique in the thread, errors too, even two refused in the same millisecond.
    const refused = await Promise.all(
      [1, 2, 3].map(() => send(handler({ serverUrl: "http://127.0.0.1:1" }), "hello")),
    );
    const ids = [badToken, unknownRequest, down, unreachable, ...refused]
      .flatMap((result) => result.messages)
      .filter((message) => message.type === "error")
      .map((message) => message.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("reconnects with Last-Event-ID when the stream drops mid-run: the same messages, nothing missed, nothing twice", async () => {
    const script = () => [
      code('  console.log("balance", await moss.vault.balance());', "First I look."),
      code('  console.log("again", await moss.vault.balance());', "Then I look again."),
      { content: "Done: 100 euros." },
    ];
    replies.push(...script());
    const whole = await send(handler(), "Look twice.");

    // A fetch whose event streams are cut after their third event: every reconnection gets only a piece.
    let streams = 0;
    const resumedFrom: string[] = [];
    const cutting: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (!String(input).endsWith("/events")) return response;
      streams++;
      resumedFrom.push(new Headers(init?.headers).get("last-event-id") ?? "");
      const reader = response.body!.getReader();
      let events = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { done, value } = await reader.read();
          if (done || events >= 3) {
            await reader.cancel();
            controller.close();
            return;
          }
          events += new TextDecoder().decode(value).split("\n\n").length - 1;
          controller.enqueue(value);
        },
      });
      return new Response(body, { status: response.status, headers: response.headers });
    };
    replies.push(...script());
    const cut = await send(handler({ fetch: cutting, reconnectDelayMs: 10 }), "Look twice.");
    expect(streams).toBeGreaterThan(1);
    expect(resumedFrom.slice(1).every((id, index) => Number(id) > Number(resumedFrom[index]))).toBe(true);
    const strip = (messages: PublishedMessage[]) => messages.map(({ id: _id, ...rest }) => rest);
    expect(strip(cut.messages)).toEqual(strip(whole.messages));
    const ids = cut.messages.map((message) => message.id);
    expect(ids.length - new Set(ids).size).toBe(
      whole.messages.length - new Set(whole.messages.map((message) => message.id)).size,
    );
  });
  it("by default keeps reopening a stream through a server restart's worth of refused connections, then gets the rest", async () => {
    replies.push(code('  console.log("balance", await moss.vault.balance());'), {
      content: "You have 100 euros.",
    });
    // The server is down (connection refused) for the first ten tries at the stream, as while it restarts: the
    // server here took 11-17 s to come back, longer than five tries backing off from 250 ms (7.75 s).
    let refusals = 0;
    const restarting: typeof fetch = async (input, init) => {
      if (String(input).endsWith("/events") && refusals < 10) {
        refusals++;
        throw new TypeError("fetch failed");
      }
      return fetch(input, init);
    };
    const result = await send(handler({ fetch: restarting, reconnectDelayMs: 1 }), "What is my balance?");
    expect(refusals).toBe(10);
    expect(result.messages.filter((message) => message.type === "error")).toEqual([]);
    expect(result.messages.at(-1)).toMatchObject({ type: "answer", content: "You have 100 euros." });
  });
});
