// Defects found by driving `moss serve` from outside as a client would (issue 18): each test is one request a real
// client sent that the server mishandled. Real HTTP on 127.0.0.1, a real worker, PGlite.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MossServer } from "../../engine/server/moss-server.ts";
import { TenantTokens } from "../../engine/server/tenant-tokens.ts";
import type { FakeReply } from "../agent/fake-openai-server.ts";
import { call, readEvents, runSettles, startTestServer, TOKENS, useVaultServer } from "./server-harness.ts";

const code = (body: string): FakeReply => ({
  content: "",
  toolCalls: [
    { name: "moss", arguments: JSON.stringify({ code: `async function main(moss: Moss) {\n${body}\n}` }) },
  ],
});

describe("moss serve driven from outside", () => {
  const vault = useVaultServer("moss-outside-");

  const newThread = async () => {
    const id = `t-${randomUUID()}`;
    expect((await call(vault.server, "POST", "/v1/threads", { body: { id } })).status).toBe(201);
    return id;
  };

  it("refuses a body nested deeper than the server can store with a 400, and serves on", async () => {
    const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;
    const deep = await call(vault.server, "POST", "/v1/threads", {
      raw: `{"id":"deep-${randomUUID()}","metadata":{"a":${nested(100_000)}}}`,
    });
    expect(deep.status).toBe(400);
    expect(deep.body.error).toMatchObject({ code: "json-invalid", message: expect.stringContaining("deep") });
    const agui = await call(vault.server, "POST", "/v1/agui", {
      raw: `{"threadId":"t","runId":"r","messages":[],"state":${nested(5_000)}}`,
    });
    expect(agui.status).toBe(400);
    // Ordinary nesting, and brackets inside strings, are fine.
    const fine = await call(vault.server, "POST", "/v1/threads", {
      body: {
        id: `fine-${randomUUID()}`,
        metadata: { a: JSON.parse(nested(20)), note: "[[[[{{{{".repeat(40) },
      },
    });
    expect(fine.status).toBe(201);
    expect((await call(vault.server, "GET", "/health", { tenant: null })).status).toBe(200);
  });

  it("refuses an answer outside a question's choices with 400 answer-invalid and keeps the run paused for a right one", async () => {
    vault.replies.push(
      code(
        '  const colour = await moss.ask("Which colour?", { choices: ["red", "blue"] });\n  console.log(colour);',
      ),
      { content: "You chose." },
    );
    const thread = await newThread();
    await call(vault.server, "POST", `/v1/threads/${thread}/runs`, { body: { message: "Ask me a colour." } });
    const paused = await readEvents(vault.server, thread, runSettles);
    const request = paused.find((event) => event.event === "clarification-request")!.data.request;
    expect(request.choices).toEqual(["red", "blue"]);

    const wrong = await call(vault.server, "POST", `/v1/threads/${thread}/answers`, {
      body: { answers: { [request.id]: { answer: "green" } } },
    });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error.code).toBe("answer-invalid");
    expect(wrong.body.error.message).toContain('"red", "blue"');
    const state = await call(vault.server, "GET", `/v1/threads/${thread}`);
    expect(state.body.status).toBe("pending");
    expect(state.body.pending.map((pending: { id: string }) => pending.id)).toEqual([request.id]);

    const right = await call(vault.server, "POST", `/v1/threads/${thread}/answers`, {
      body: { answers: { [request.id]: { answer: "blue" } } },
    });
    expect(right.status).toBe(202);
    const resumed = await readEvents(
      vault.server,
      thread,
      (event) => event.event === "run-status" && ["completed", "failed"].includes(event.data.status),
      { after: state.body.lastEventId },
    );
    expect(resumed.at(-1)!.data.status).toBe("completed");
    const execution = resumed.find((event) => event.event === "execution")!;
    expect(execution.data.execution.stdout).toContain("blue");
  });
});

describe("moss serve with a module that cannot load", () => {
  it("refuses to start, naming the file and the cause, instead of serving and failing every run", async () => {
    const directory = await mkdtemp(join(tmpdir(), "moss-outside-broken-"));
    try {
      // A host setup that cannot bind its services (here: a credential missing from the environment).
      await writeFile(join(directory, "context.ts"), "export class Moss {}\n");
      await writeFile(
        join(directory, "context.host.ts"),
        'export function setup(): void {\n  throw new Error("VAULT_TOKEN is not set");\n}\n',
      );
      const started = startTestServer({ dataDirectory: join(directory, "data") }, "http://127.0.0.1:1/v1", {
        modulePath: join(directory, "context.ts"),
      });
      await expect(started).rejects.toThrow(/context\.host\.ts.*VAULT_TOKEN is not set/s);

      const missing = startTestServer({ dataDirectory: join(directory, "data") }, "http://127.0.0.1:1/v1", {
        modulePath: join(directory, "nowhere", "context.ts"),
      });
      await expect(missing).rejects.toThrow(/nowhere/);
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

describe("moss serve called from a web app on another origin", () => {
  const APP = "http://app.example:3000";
  let server: MossServer;
  let directory: string;

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), "moss-outside-cors-"));
    server = await startTestServer({ dataDirectory: join(directory, "data") }, "http://127.0.0.1:1/v1", {
      http: { port: 0, tokens: TenantTokens.parse([`alice:${TOKENS.alice}`], "test"), corsOrigins: [APP] },
    });
  }, 60_000);
  afterAll(async () => {
    await server?.close(1_000);
    await rm(directory, { recursive: true, force: true });
  });

  it("answers a browser's preflight for an allowed origin (no token), lets it read answers and errors, and no other origin", async () => {
    const preflight = await fetch(`${server.url}/v1/threads/t1/events`, {
      method: "OPTIONS",
      headers: {
        origin: APP,
        "access-control-request-method": "GET",
        "access-control-request-headers": "authorization,last-event-id",
      },
    });
    expect(preflight.status).toBeLessThan(300);
    expect(preflight.headers.get("access-control-allow-origin")).toBe(APP);
    const allowed = (preflight.headers.get("access-control-allow-headers") ?? "").toLowerCase();
    for (const header of ["authorization", "content-type", "idempotency-key", "last-event-id"])
      expect(allowed).toContain(header);

    const listed = await fetch(`${server.url}/v1/threads`, {
      headers: { origin: APP, authorization: `Bearer ${TOKENS.alice}` },
    });
    expect(listed.status).toBe(200);
    expect(listed.headers.get("access-control-allow-origin")).toBe(APP);

    // A refused token is readable by the page (its error body), and says how to authenticate (RFC 6750).
    const refused = await fetch(`${server.url}/v1/threads`, { headers: { origin: APP } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("access-control-allow-origin")).toBe(APP);
    expect(refused.headers.get("www-authenticate")).toMatch(/^Bearer/);

    const elsewhere = await fetch(`${server.url}/v1/threads`, {
      method: "OPTIONS",
      headers: { origin: "http://evil.example", "access-control-request-method": "GET" },
    });
    expect(elsewhere.headers.get("access-control-allow-origin")).toBeNull();
  });
});
