// What the studio shows beside a thread's events (issue 26): the session's data fields after each run (a `session`
// event and GET /session), the prompt the model reads (GET /prompt) and a message's image bytes (GET …/images/:i),
// each tenant-scoped, redacted and bounded. A real `moss serve` core on PGlite with the vault module.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { truncateMiddle } from "../../engine/format-value.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { SESSION_FIELD_MAX_CHARS } from "../../engine/server/worker/session-fields.ts";
import { type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { createPostgresDatabase } from "../helpers/postgres-database.ts";
import { POSTGRES_TESTS } from "../helpers/postgres-server.ts";
import {
  call,
  code,
  readEvents,
  runSettles,
  startTestServer,
  TOKENS,
  useVaultServer,
} from "./server-harness.ts";

// A 1×1 PNG.
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

describe("the thread's session, prompt and images", () => {
  const vault = useVaultServer("moss-views-", {
    agent: { maxSteps: 5, instructions: "Be brief." },
  });

  const newThread = async () => {
    const id = `views-${randomUUID()}`;
    expect((await call(vault.server, "POST", "/v1/threads", { body: { id } })).status).toBe(201);
    return id;
  };
  /** Runs `body` as the model's code, then the model answers; resolves the events of the run (after `after`). */
  const runCode = async (thread: string, body: string, after = 0, images?: unknown[]) => {
    vault.replies.push(code(body), { content: "Done." });
    const posted = await call(vault.server, "POST", `/v1/threads/${thread}/runs`, {
      body: { message: "Go.", ...(images === undefined ? {} : { images }) },
    });
    expect(posted.status).toBe(202);
    const events = await readEvents(vault.server, thread, (event) => event.id > after && runSettles(event), {
      after,
    });
    expect(events.at(-1)!.data.status).toBe("completed");
    return events;
  };
  const get = (thread: string, path: string, tenant: keyof typeof TOKENS = "alice") =>
    call(vault.server, "GET", `/v1/threads/${thread}${path}`, { tenant });

  it("a session event follows each execution with the data fields and what changed; GET /session answers the last", async () => {
    const thread = await newThread();
    expect(await get(thread, "/session")).toEqual({ status: 200, body: { fields: {} } });

    const first = await runCode(thread, '  moss.notes.push("milk");');
    const types = first.map((event) => event.event);
    // Stored and streamed right after its execution, of the same run and step.
    const at = types.indexOf("session");
    expect(types[at - 1]).toBe("execution");
    const session = first[at]!.data;
    expect(session).toEqual({
      type: "session",
      runId: first[at - 1]!.data.runId,
      step: first[at - 1]!.data.step,
      fields: { notes: '[\n  "milk"\n]' },
      changed: ["notes"],
    });

    const now = await get(thread, "/session");
    expect(now.status).toBe(200);
    expect(now.body.fields).toEqual({ notes: '[\n  "milk"\n]' });
    expect(Number.isNaN(Date.parse(now.body.updatedAt))).toBe(false);

    // A run that leaves the data alone changes nothing; the next run that writes names the field again.
    const second = await runCode(thread, '  console.log("look only");', first.at(-1)!.id);
    expect(second.find((event) => event.event === "session")!.data).toMatchObject({
      fields: { notes: '[\n  "milk"\n]' },
      changed: [],
    });
    const third = await runCode(thread, '  moss.notes.push("eggs");', second.at(-1)!.id);
    expect(third.find((event) => event.event === "session")!.data).toMatchObject({
      fields: { notes: '[\n  "milk",\n  "eggs"\n]' },
      changed: ["notes"],
    });
  });

  it("another tenant's thread is not there: 404 thread-not-found on every view", async () => {
    const thread = await newThread();
    await runCode(thread, '  moss.notes.push("alice only");');
    for (const path of ["/session", "/prompt", "/messages/anything/images/0"]) {
      const refused = await get(thread, path, "bob");
      expect(refused).toMatchObject({ status: 404, body: { error: { code: "thread-not-found" } } });
      expect(JSON.stringify(refused.body)).not.toContain("alice only");
    }
    const missing = await get(`views-missing-${randomUUID()}`, "/session");
    expect(missing).toMatchObject({ status: 404, body: { error: { code: "thread-not-found" } } });
    const noToken = await call(vault.server, "GET", `/v1/threads/${thread}/session`, { tenant: null });
    expect(noToken.status).toBe(401);
  });

  it("a secret of the server in a field is redacted, in the event and in GET /session", async () => {
    const thread = await newThread();
    // bob's bearer token is a secret the server holds; so is alice's.
    const events = await runCode(thread, `  moss.notes.push("key=${TOKENS.bob} and ${TOKENS.alice}");`);
    const session = events.find((event) => event.event === "session")!.data;
    expect(session.fields.notes).toContain("key=");
    expect(JSON.stringify(session)).not.toContain(TOKENS.bob);
    expect(JSON.stringify(session)).not.toContain(TOKENS.alice);
    const now = await get(thread, "/session");
    expect(now.body.fields.notes).toContain("key=");
    expect(JSON.stringify(now.body)).not.toContain(TOKENS.bob);
  });

  it("an oversized field is cut to the bound with a visible marker; a secret across the cut is still redacted", async () => {
    const thread = await newThread();
    const max = SESSION_FIELD_MAX_CHARS;
    // The field's text is `[\n  "` + a… + the secret + b… + `"\n]`: the a's are as many as put the secret's first
    // five characters at the end of the head the cut keeps (cut first, it would leave "bob-s" there).
    const lengthWith = (as: number) => 5 + as + TOKENS.bob.length + max + 3;
    let as = 2_000;
    for (let round = 0; round < 3; round++) {
      const head = truncateMiddle("x".repeat(lengthWith(as)), max).indexOf("\n…");
      as = head - 5 - 5;
    }
    const events = await runCode(
      thread,
      `  moss.notes.push("a".repeat(${as}) + "${TOKENS.bob}" + "b".repeat(${max}));`,
    );
    const field: string = events.find((event) => event.event === "session")!.data.fields.notes;
    expect(field.length).toBeLessThanOrEqual(SESSION_FIELD_MAX_CHARS);
    expect(field).toMatch(/\[truncated \d+ characters\]/);
    expect(field.startsWith('[\n  "aaaa')).toBe(true);
    expect(field.endsWith('bbbb"\n]')).toBe(true);
    expect(field).not.toContain(TOKENS.bob.slice(0, 5));
    expect((await get(thread, "/session")).body.fields.notes).toBe(field);
  });

  it("GET /prompt answers the module's visible source and declarations, never a hidden region, and the instructions", async () => {
    const thread = await newThread();
    const prompt = await get(thread, "/prompt");
    expect(prompt.status).toBe(200);
    expect(prompt.body.module).toMatch(/vault\/context\.ts$/);
    expect(prompt.body.prompt).toContain("notes: string[] = [];");
    expect(prompt.body.prompt).toContain("vault!: Vault;");
    // The reflected declaration of the imported Vault class.
    expect(prompt.body.prompt).toMatch(/class Vault/);
    for (const hidden of ["__moss_compile__", "__moss_attr_prompts__", "moss-hide", "bind a Vault"]) {
      expect(prompt.body.prompt).not.toContain(hidden);
    }
    expect(prompt.body.instructions).toBe("Be brief.");
    // The same text the agent sent the model as its system prompt's module section.
    await runCode(thread, '  console.log("hi");');
    const system = vault.model.requests.at(-1)!.body.messages[0].content as string;
    expect(system).toContain(prompt.body.prompt.trim());
  });

  it("GET …/messages/:id/images/:i serves a stored image's bytes with its type and nosniff; URLs, missing images and messages are 404", async () => {
    const thread = await newThread();
    const events = await runCode(thread, '  console.log("seen");', 0, [
      { mediaType: "image/png", data: PNG, name: "pixel.png" },
      { mediaType: "image/jpeg", url: "https://images.example/shelf.jpg" },
    ]);
    const task = events.find(
      (event) => event.event === "message" && event.data.message.metadata?.kind === "task",
    )!.data.message;
    expect(task.images).toHaveLength(2);
    const path = `/v1/threads/${thread}/messages/${encodeURIComponent(task.id)}/images`;
    const response = await fetch(`${vault.server.url}${path}/0`, {
      headers: { authorization: `Bearer ${TOKENS.alice}` },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("image/png");
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");
    expect(Buffer.from(await response.arrayBuffer()).equals(Buffer.from(PNG, "base64"))).toBe(true);

    const refusal = async (url: string, tenant: keyof typeof TOKENS | null = "alice") =>
      call(vault.server, "GET", url, { tenant });
    expect(await refusal(`${path}/1`)).toMatchObject({
      status: 404,
      body: { error: { code: "image-not-stored" } },
    });
    for (const index of ["2", "-1", "1e1", "01", "x"]) {
      expect(await refusal(`${path}/${index}`)).toMatchObject({
        status: 404,
        body: { error: { code: "image-not-found" } },
      });
    }
    expect(await refusal(`/v1/threads/${thread}/messages/${randomUUID()}/images/0`)).toMatchObject({
      status: 404,
      body: { error: { code: "message-not-found" } },
    });
    expect(await refusal(`${path}/0`, "bob")).toMatchObject({
      status: 404,
      body: { error: { code: "thread-not-found" } },
    });
    expect((await refusal(`${path}/0`, null)).status).toBe(401);
  });

  it("an image the code showed with moss.show is served from its observation message", async () => {
    const thread = await newThread();
    const events = await runCode(
      thread,
      `  moss.show({ mediaType: "image/png", data: ${JSON.stringify(PNG)} });`,
    );
    const observation = events.find(
      (event) =>
        event.event === "message" && event.data.message.role !== "assistant" && event.data.message.images,
    )!.data.message;
    const response = await fetch(
      `${vault.server.url}/v1/threads/${thread}/messages/${encodeURIComponent(observation.id)}/images/0`,
      { headers: { authorization: `Bearer ${TOKENS.alice}` } },
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("image/png");
    expect(Buffer.from(await response.arrayBuffer()).equals(Buffer.from(PNG, "base64"))).toBe(true);
  });
});

describe.runIf(POSTGRES_TESTS)("the thread's session and images on PostgreSQL", () => {
  it("GET /session answers the last session event and GET …/images/:i the stored bytes; another tenant 404", async () => {
    const postgres = await createPostgresDatabase();
    const replies: FakeReply[] = [];
    const model = await startFakeOpenAIServer(replies);
    const directory = await mkdtemp(join(tmpdir(), "moss-views-pg-"));
    process.env.MOSS_VAULT_LOG = join(directory, "vault.log");
    const server = await startTestServer({ url: postgres.url }, model.baseUrl);
    try {
      const thread = `views-pg-${randomUUID()}`;
      await call(server, "POST", "/v1/threads", { body: { id: thread } });
      expect((await call(server, "GET", `/v1/threads/${thread}/session`)).body).toEqual({ fields: {} });
      replies.push(code('  moss.notes.push("on postgres");'), { content: "Done." });
      await call(server, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Go.", images: [{ mediaType: "image/png", data: PNG }] },
      });
      const events = await readEvents(server, thread, runSettles);
      const session = await call(server, "GET", `/v1/threads/${thread}/session`);
      expect(session.body.fields).toEqual({ notes: '[\n  "on postgres"\n]' });
      expect(typeof session.body.updatedAt).toBe("string");
      const task = events.find((event) => event.event === "message" && event.data.message.images)!;
      const path = `/v1/threads/${thread}/messages/${encodeURIComponent(task.data.message.id)}/images/0`;
      const image = await fetch(`${server.url}${path}`, {
        headers: { authorization: `Bearer ${TOKENS.alice}` },
      });
      expect(image.headers.get("content-type")).toBe("image/png");
      expect(image.headers.get("x-content-type-options")).toBe("nosniff");
      expect(Buffer.from(await image.arrayBuffer()).equals(Buffer.from(PNG, "base64"))).toBe(true);
      for (const route of [`/v1/threads/${thread}/session`, path]) {
        expect((await call(server, "GET", route, { tenant: "bob" })).body.error.code).toBe(
          "thread-not-found",
        );
      }
    } finally {
      await server.close(1_000);
      await model.close();
      await closeSharedSandboxes();
      await postgres.drop();
      await rm(directory, { recursive: true, force: true });
      delete process.env.MOSS_VAULT_LOG;
    }
  }, 120_000);
});
