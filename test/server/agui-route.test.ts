// POST /v1/agui on a real `moss serve` core (PGlite): every event of the stream is checked against @ag-ui/core's
// own schemas; approvals and moss.ask end a run with interrupts, resume entries answer them, and a stream resumes
// with Last-Event-ID.
import { randomUUID } from "node:crypto";
import { buildResumeArray, HttpAgent } from "@ag-ui/client";
import { EventSchema, RunAgentInputSchema } from "@ag-ui/core/schemas";
import { describe, expect, it } from "vitest";
import { call, code, readSse, TOKENS, TRANSFER, useVaultServer } from "./server-harness.ts";

interface AguiEvent {
  id: string;
  event: any;
}

describe("the AG-UI endpoint on PGlite", () => {
  const vault = useVaultServer("moss-agui-");
  const { replies, transfers } = vault;
  const input = (threadId: string, extra: Record<string, unknown> = {}) =>
    RunAgentInputSchema.parse({ threadId, runId: randomUUID(), messages: [], ...extra });

  /** Posts `body` and reads the SSE stream to its end, each event parsed by @ag-ui/core's EventSchema. */
  const run = async (
    body: unknown,
    options: { lastEventId?: string; token?: string; stopAfter?: number } = {},
  ): Promise<AguiEvent[]> => {
    const controller = new AbortController();
    const response = await fetch(`${vault.server.url}/v1/agui`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${options.token ?? TOKENS.alice}`,
        "content-type": "application/json",
        accept: "text/event-stream",
        ...(options.lastEventId === undefined ? {} : { "last-event-id": options.lastEventId }),
      },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (response.status !== 200)
      throw Object.assign(new Error(await response.text()), { status: response.status });
    const received: AguiEvent[] = [];
    try {
      await readSse(response, (message) => {
        const event = EventSchema.parse(JSON.parse(message.data));
        expect(message.event).toBe(event.type);
        received.push({ id: message.id!, event });
        return received.length === options.stopAfter;
      });
      return received;
    } finally {
      controller.abort();
    }
  };
  const types = (events: AguiEvent[]) => events.map(({ event }) => event.type);

  it("streams a run as AG-UI events: RUN_STARTED, the text, the moss tool call and its result, RUN_FINISHED with the answer", async () => {
    replies.push(code('  console.log("balance", await moss.vault.balance());', "Let me check."), {
      content: "You have 100 euros.",
    });
    const body = input(`agui-${randomUUID()}`, {
      messages: [{ id: "m1", role: "user", content: "What is my balance?" }],
    });
    const events = await run(body);
    // Each text's pieces collapsed: the fake model streams a few characters at a time.
    expect(types(events).filter((type, index, all) => type !== all[index - 1])).toEqual([
      "RUN_STARTED",
      "TEXT_MESSAGE_START",
      "TEXT_MESSAGE_CONTENT",
      "TEXT_MESSAGE_END",
      "TOOL_CALL_START",
      "TOOL_CALL_ARGS",
      "TOOL_CALL_END",
      "TOOL_CALL_RESULT",
      "TEXT_MESSAGE_START",
      "TEXT_MESSAGE_CONTENT",
      "TEXT_MESSAGE_END",
      "RUN_FINISHED",
    ]);
    const first = events[1]!.event.messageId;
    const pieces = events.filter(
      ({ event }) => event.type === "TEXT_MESSAGE_CONTENT" && event.messageId === first,
    );
    expect(pieces.map(({ event }) => event.delta).join("")).toBe("Let me check.");
    expect(events[0]!.event).toMatchObject({ threadId: body.threadId, runId: body.runId });
    const call = events.find(({ event }) => event.type === "TOOL_CALL_START")!.event;
    expect(call.toolCallName).toBe("moss");
    expect(
      JSON.parse(events.find(({ event }) => event.type === "TOOL_CALL_ARGS")!.event.delta).code,
    ).toContain("moss.vault.balance()");
    const result = events.find(({ event }) => event.type === "TOOL_CALL_RESULT")!.event;
    expect(result.toolCallId).toBe(call.toolCallId);
    expect(result.content).toContain("balance 100");
    expect(events.at(-1)!.event).toMatchObject({
      type: "RUN_FINISHED",
      threadId: body.threadId,
      runId: body.runId,
      result: "You have 100 euros.",
      outcome: { type: "success" },
    });
    expect(new Set(events.map(({ id }) => id)).size).toBe(events.length);
  });

  it("ends a run with an approval interrupt naming the inner call; a resume entry approves it and the run ends once", async () => {
    replies.push(code(TRANSFER), { content: "Sent 5 euros to bob." });
    const before = (await transfers()).length;
    const threadId = `agui-${randomUUID()}`;
    const paused = await run(
      input(threadId, { messages: [{ id: "m1", role: "user", content: "Send bob 5." }] }),
    );
    const finished = paused.at(-1)!.event;
    expect(finished.outcome.type).toBe("interrupt");
    const [interrupt] = finished.outcome.interrupts;
    const toolCallId = paused.find(({ event }) => event.type === "TOOL_CALL_START")!.event.toolCallId;
    // AG-UI's core reason for an interrupt bound to a tool call awaiting a decision (docs.ag-ui.com/concepts/interrupts).
    expect(interrupt).toMatchObject({
      reason: "tool_call",
      toolCallId,
      // The engine's description of the request (stored with its request event), not words of the route's own.
      message: `#${interrupt.id} approval vault.transfer("bob", 5) at line 2`,
      metadata: {
        call: "vault.transfer",
        service: "vault",
        member: "transfer",
        args: ["bob", 5],
        // What a person needs to judge it, as the native API's request carries it (issue 26).
        parameters: ["to", "amount"],
        doc: "Sends `amount` euros to `to` and returns the receipt number.\n@approval",
      },
      responseSchema: { required: ["approved"] },
    });
    // A stream resumed after the request event says the same.
    const again = await run(input(threadId, { runId: paused[0]!.event.runId }), {
      lastEventId: paused.at(-2)!.id,
    });
    expect(again.map(({ event }) => event.outcome?.interrupts?.[0]?.message)).toEqual([interrupt.message]);
    expect((await transfers()).length).toBe(before);
    // The paused call has no result yet: it comes in the resumed run, against the same toolCallId.
    expect(paused.filter(({ event }) => event.type === "TOOL_CALL_RESULT")).toEqual([]);

    const resume = input(threadId, {
      resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }],
    });
    const resumed = await run(resume);
    expect(resumed[0]!.event).toMatchObject({ type: "RUN_STARTED", runId: resume.runId });
    expect(resumed.at(-1)!.event).toMatchObject({
      result: "Sent 5 euros to bob.",
      outcome: { type: "success" },
    });
    expect((await transfers()).length - before).toBe(1);
    const results = resumed.filter(({ event }) => event.type === "TOOL_CALL_RESULT");
    expect(results.map(({ event }) => event.toolCallId)).toEqual([toolCallId]);
    expect(results[0]!.event.content).toContain("sent");
  });

  it("ends a run that calls moss.ask with an input-required interrupt carrying its choices; the answer resumes it", async () => {
    replies.push(
      code(
        '  const color = await moss.ask("Which color?", { choices: ["red", "blue"] });\n  console.log("color", color);',
      ),
      { content: "Blue it is." },
    );
    const threadId = `agui-${randomUUID()}`;
    const paused = await run(
      input(threadId, { messages: [{ id: "m1", role: "user", content: "Pick one." }] }),
    );
    const [interrupt] = paused.at(-1)!.event.outcome.interrupts;
    expect(interrupt).toMatchObject({
      reason: "input_required",
      message: "Which color?",
      metadata: { choices: ["red", "blue"] },
      responseSchema: { properties: { answer: { type: "string", enum: ["red", "blue"] } } },
    });
    expect(paused.filter(({ event }) => event.type === "TOOL_CALL_RESULT")).toEqual([]);
    const resumed = await run(
      input(threadId, {
        resume: [{ interruptId: interrupt.id, status: "resolved", payload: { answer: "blue" } }],
      }),
    );
    const result = resumed.find(({ event }) => event.type === "TOOL_CALL_RESULT")!.event;
    expect(result.content).toContain("color blue");
    // The result answers the tool call of the paused run, the one the interrupt named.
    expect(result.toolCallId).toBe(interrupt.toolCallId);
    expect(resumed.at(-1)!.event.result).toBe("Blue it is.");
  });

  it("resumes a stream with Last-Event-ID: exactly the events after it, the same ids, and no new run", async () => {
    replies.push(code('  console.log("balance", await moss.vault.balance());', "Looking."), {
      content: "100.",
    });
    const body = input(`agui-${randomUUID()}`, {
      messages: [{ id: "m1", role: "user", content: "Balance?" }],
    });
    const cut = await run(body, { stopAfter: 4 });
    const rest = await run(body, { lastEventId: cut.at(-1)!.id });
    expect([...cut, ...rest].map(({ event }) => event.type).at(-1)).toBe("RUN_FINISHED");
    const modelCalls = vault.model.requests.length;
    const whole = await run(body, { lastEventId: cut[0]!.id });
    expect(vault.model.requests.length).toBe(modelCalls);
    expect([...cut.slice(1), ...rest]).toEqual(whole);
    expect(rest.at(-1)!.event.result).toBe("100.");
  });

  it("refuses bad input with a clear 4xx", async () => {
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${vault.server.url}/v1/agui`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKENS.alice}`, "content-type": "application/json", ...headers },
        body,
      }).then(async (response) => ({ status: response.status, body: await response.json() }));
    expect(await post("{")).toMatchObject({ status: 400, body: { error: { code: "json-invalid" } } });
    // A chunked upload (no Content-Length) over the tenant's limit is refused while it streams in.
    const chunk = new TextEncoder().encode(`{"threadId":"t","pad":"${"x".repeat(64 * 1024)}`);
    let sent = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        sent += chunk.byteLength;
        if (sent > 64 * 1024 * 1024) controller.close();
        else controller.enqueue(chunk);
      },
    });
    const chunked = await fetch(`${vault.server.url}/v1/agui`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKENS.alice}`, "content-type": "application/json" },
      body: endless,
      duplex: "half",
    } as RequestInit).then(async (response) => ({ status: response.status, body: await response.json() }));
    expect(chunked).toMatchObject({ status: 413, body: { error: { code: "body-too-large" } } });
    expect(sent).toBeLessThan(64 * 1024 * 1024);
    expect(await post(JSON.stringify({ runId: "r", messages: [] }))).toMatchObject({
      status: 400,
      body: { error: { code: "agui-input-invalid", message: expect.stringContaining("threadId") } },
    });
    expect(await post(JSON.stringify({ threadId: "t", runId: "r", messages: [] }))).toMatchObject({
      status: 400,
      body: { error: { code: "agui-input-invalid", message: expect.stringContaining("user") } },
    });
    expect(
      await post(JSON.stringify({ threadId: "t", runId: "r", messages: [] }), {
        "last-event-id": "nonsense",
      }),
    ).toMatchObject({ status: 400, body: { error: { code: "event-id-invalid" } } });
    const noToken = await fetch(`${vault.server.url}/v1/agui`, { method: "POST", body: "{}" });
    expect(noToken.status).toBe(401);
    // A resume entry no run waits for is not malformed input: AG-UI answers it in the stream (see below).
    const unknown = await run({
      threadId: "t",
      runId: "r",
      messages: [],
      resume: [{ interruptId: "r1", status: "resolved", payload: { approved: true } }],
    });
    expect(unknown.map(({ event }) => event)).toEqual([
      { type: "RUN_ERROR", code: "request-unknown", message: expect.stringContaining('"r1"') },
    ]);
  });
  it("answers a new message on a thread with open interrupts, and bad resume entries, with RUN_ERROR that the stock HttpAgent surfaces; the pause survives", async () => {
    replies.push(code(TRANSFER), { content: "Sent." });
    const before = (await transfers()).length;
    const threadId = `agui-${randomUUID()}`;
    const agent = new HttpAgent({
      url: `${vault.server.url}/v1/agui`,
      headers: { authorization: `Bearer ${TOKENS.alice}` },
      threadId,
    });
    agent.addMessage({ id: "u1", role: "user", content: "Send bob 5." });
    await agent.runAgent({});
    const [interrupt] = agent.pendingInterrupts;
    expect(interrupt?.reason).toBe("tool_call");

    /** A second client on the same thread (it never saw the interrupt): what its run ends with. */
    const attempt = async (parameters: Parameters<HttpAgent["runAgent"]>[0], message?: string) => {
      const other = new HttpAgent({
        url: `${vault.server.url}/v1/agui`,
        headers: { authorization: `Bearer ${TOKENS.alice}` },
        threadId,
      });
      if (message !== undefined) other.addMessage({ id: randomUUID(), role: "user", content: message });
      const errors: Array<{ code?: string; message: string }> = [];
      const result = await other.runAgent(parameters, {
        onRunErrorEvent: ({ event }) => void errors.push(event),
      });
      return { errors, result: result.result, interrupts: other.pendingInterrupts };
    };

    const busy = await attempt({}, "And send carol 3.");
    expect(busy.errors).toEqual([
      {
        type: "RUN_ERROR",
        code: "interrupts-pending",
        message: expect.stringContaining(`"${interrupt!.id}"`),
      },
    ]);
    expect(busy.errors[0]!.message).toContain("resume");
    expect(busy).toMatchObject({ result: undefined, interrupts: [] });

    const unknown = await attempt({
      resume: [{ interruptId: "no-such-interrupt", status: "resolved", payload: { approved: true } }],
    });
    expect(unknown.errors).toEqual([
      { type: "RUN_ERROR", code: "request-unknown", message: expect.stringContaining("no-such-interrupt") },
    ]);
    const noPayload = await attempt({ resume: [{ interruptId: interrupt!.id, status: "resolved" }] });
    expect(noPayload.errors).toEqual([
      { type: "RUN_ERROR", code: "answer-invalid", message: expect.stringContaining("payload") },
    ]);

    // Nothing was lost: the run still waits, and the right answer resumes it once.
    expect((await transfers()).length).toBe(before);
    const answered = await agent.runAgent({
      resume: buildResumeArray(agent.pendingInterrupts, {
        [interrupt!.id]: { status: "resolved", payload: { approved: true } },
      }),
    });
    expect(answered.result).toBe("Sent.");
    expect((await transfers()).length - before).toBe(1);
  });
  it("answers a new message on a thread whose run is running with a stream of one RUN_ERROR thread-busy (the native API keeps its 409)", async () => {
    let release = () => {};
    const hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    replies.push({ content: "Done at last.", hold });
    const threadId = `agui-${randomUUID()}`;
    const message = (content: string) => ({ messages: [{ id: randomUUID(), role: "user", content }] });
    let first: Promise<AguiEvent[]> | undefined;
    try {
      const asked = vault.model.requests.length;
      first = run(input(threadId, message("Take your time.")));
      // The run is running once the model was asked (its answer is held).
      while (vault.model.requests.length === asked) await new Promise((resolve) => setTimeout(resolve, 20));
      const busy = await run(input(threadId, message("And another thing.")));
      expect(busy.map(({ event }) => event)).toEqual([
        { type: "RUN_ERROR", code: "thread-busy", message: expect.stringContaining("(running)") },
      ]);
      const native = await call(vault.server, "POST", `/v1/threads/${threadId}/runs`, {
        body: { message: "And another thing." },
      });
      expect(native).toMatchObject({ status: 409, body: { error: { code: "thread-busy" } } });
    } finally {
      release();
    }
    // The running run was not disturbed: it ends with its own answer.
    const events = await first;
    expect(events.at(-1)?.event).toMatchObject({ type: "RUN_FINISHED", result: "Done at last." });
  });
  it("drives an approval and a question with the stock @ag-ui/client HttpAgent: one tool message per tool call, the run's answer", async () => {
    replies.push(code(TRANSFER, "Sending."), { content: "Sent." });
    replies.push(
      code(
        '  const color = await moss.ask("Which color?", { choices: ["red", "blue"] });\n  console.log(color);',
      ),
      { content: "Red." },
    );
    const agent = new HttpAgent({
      url: `${vault.server.url}/v1/agui`,
      headers: { authorization: `Bearer ${TOKENS.alice}` },
      threadId: `agui-${randomUUID()}`,
    });
    agent.addMessage({ id: "u1", role: "user", content: "Send bob 5." });
    await agent.runAgent({});
    expect(agent.pendingInterrupts.map((interrupt) => interrupt.reason)).toEqual(["tool_call"]);
    await agent.runAgent({
      resume: buildResumeArray(agent.pendingInterrupts, {
        [agent.pendingInterrupts[0]!.id]: { status: "resolved", payload: { approved: true } },
      }),
    });
    expect(agent.pendingInterrupts).toEqual([]);

    agent.addMessage({ id: "u2", role: "user", content: "Pick a color." });
    const asked = await agent.runAgent({});
    expect(asked.result).toBeUndefined();
    const [question] = agent.pendingInterrupts;
    expect(question).toMatchObject({ reason: "input_required", metadata: { choices: ["red", "blue"] } });
    const answered = await agent.runAgent({
      resume: buildResumeArray([question!], {
        [question!.id]: { status: "resolved", payload: { answer: "red" } },
      }),
    });
    expect(answered.result).toBe("Red.");

    const toolMessages = agent.messages.filter((message) => message.role === "tool") as Array<{
      toolCallId: string;
      content: string;
    }>;
    const calls = agent.messages.flatMap((message) =>
      message.role === "assistant" ? (message.toolCalls ?? []).map((call) => call.id) : [],
    );
    // Each moss tool call has exactly one result, the one after the person answered.
    expect(toolMessages.map((message) => message.toolCallId)).toEqual(calls);
    expect(toolMessages.map((message) => message.content)).toEqual([
      expect.stringContaining("sent"),
      expect.stringContaining("red"),
    ]);
  });
  it("a code that pauses twice names its one tool call in both interrupts and gets one result, after the last answer", async () => {
    replies.push(
      code(
        '  console.log(await moss.vault.transfer("bob", 1));\n  console.log(await moss.vault.transfer("eve", 2));',
      ),
      { content: "Both sent." },
    );
    const threadId = `agui-${randomUUID()}`;
    const first = await run(
      input(threadId, { messages: [{ id: "m1", role: "user", content: "Pay bob and eve." }] }),
    );
    const toolCallId = first.find(({ event }) => event.type === "TOOL_CALL_START")!.event.toolCallId;
    const [bob] = first.at(-1)!.event.outcome.interrupts;
    expect(bob).toMatchObject({ reason: "tool_call", toolCallId, metadata: { args: ["bob", 1] } });

    const second = await run(
      input(threadId, { resume: [{ interruptId: bob.id, status: "resolved", payload: { approved: true } }] }),
    );
    expect(second.filter(({ event }) => event.type === "TOOL_CALL_RESULT")).toEqual([]);
    const [eve] = second.at(-1)!.event.outcome.interrupts;
    expect(eve).toMatchObject({ reason: "tool_call", toolCallId, metadata: { args: ["eve", 2] } });

    const last = await run(
      input(threadId, { resume: [{ interruptId: eve.id, status: "resolved", payload: { approved: true } }] }),
    );
    const results = last.filter(({ event }) => event.type === "TOOL_CALL_RESULT");
    expect(results.map(({ event }) => event.toolCallId)).toEqual([toolCallId]);
    expect(last.at(-1)!.event).toMatchObject({ result: "Both sent.", outcome: { type: "success" } });
  });
});
