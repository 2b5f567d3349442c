// A new message's images through the server (issue 18: `agent.run({ task, images })` takes them, so the API does):
// the native run body's `images` and AG-UI's image content parts are checked by the agent's own image rules,
// stored with the conversation and sent to the model — the fake OpenAI server sees the image_url parts.
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { call, readEvents, readSse, runSettles, TOKENS, useVaultServer } from "./server-harness.ts";

// A 1×1 PNG.
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

describe("images of a new message", () => {
  const vault = useVaultServer("moss-images-", { tenantLimits: { bob: { maxBodyBytes: 600 } } });

  const newThread = async () => {
    const id = `img-${randomUUID()}`;
    expect((await call(vault.server, "POST", "/v1/threads", { body: { id } })).status).toBe(201);
    return id;
  };
  /** The image_url parts of the user messages of a chat request the model received. */
  const imageUrls = (request: { body: Record<string, any> }) =>
    (request.body.messages as Array<{ role: string; content: unknown }>)
      .filter((message) => message.role === "user" && Array.isArray(message.content))
      .flatMap((message) => message.content as Array<{ type: string; image_url?: { url: string } }>)
      .filter((part) => part.type === "image_url")
      .map((part) => part.image_url!.url);

  it("the native API takes { message, images }: the model request carries the image, and later runs of the thread still do", async () => {
    const thread = await newThread();
    vault.replies.push({ content: "A single pixel." });
    const before = vault.model.requests.length;
    const posted = await call(vault.server, "POST", `/v1/threads/${thread}/runs`, {
      body: {
        message: "What is in this picture?",
        images: [
          { mediaType: "image/png", data: PNG, detail: "low" },
          { mediaType: "image/jpeg", url: "https://images.example/shelf.jpg" },
        ],
      },
    });
    expect(posted.status).toBe(202);
    const events = await readEvents(vault.server, thread, runSettles);
    expect(events.at(-1)!.data.status).toBe("completed");
    const first = vault.model.requests.slice(before);
    expect(first).toHaveLength(1);
    expect(imageUrls(first[0]!)).toEqual([
      `data:image/png;base64,${PNG}`,
      "https://images.example/shelf.jpg",
    ]);
    expect(
      first[0]!.body.messages.at(-1).content.find((part: { type: string }) => part.type === "image_url"),
    ).toEqual({ type: "image_url", image_url: { url: `data:image/png;base64,${PNG}`, detail: "low" } });

    // Stored with the conversation: the next message's model request shows the earlier image again.
    vault.replies.push({ content: "Still a pixel." });
    await call(vault.server, "POST", `/v1/threads/${thread}/runs`, { body: { message: "And now?" } });
    await readEvents(vault.server, thread, (event) => runSettles(event) && event.id > events.at(-1)!.id, {
      after: events.at(-1)!.id,
    });
    expect(imageUrls(vault.model.requests.at(-1)!)).toEqual([
      `data:image/png;base64,${PNG}`,
      "https://images.example/shelf.jpg",
    ]);
  });

  it("refuses a bad image with 400 images-invalid naming it, and starts no run", async () => {
    const thread = await newThread();
    const cases: Array<[unknown, RegExp]> = [
      [{ mediaType: "image/png" }, /^images\[0\] needs either data \(its bytes\) or url/],
      [{ mediaType: "image/bmp", data: PNG }, /^images\[0\]\.mediaType must be one of image\/png/],
      [{ mediaType: "image/png", data: "not base64!" }, /^images\[0\]\.data must be bytes or base64 text/],
      [{ mediaType: "image/png", url: "file:///etc/passwd" }, /^images\[0\]\.url must be an http\(s\) URL/],
    ];
    for (const [image, message] of cases) {
      const refused = await call(vault.server, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Look.", images: [image] },
      });
      expect(refused).toMatchObject({ status: 400, body: { error: { code: "images-invalid" } } });
      expect(refused.body.error.message).toMatch(message);
    }
    const notArray = await call(vault.server, "POST", `/v1/threads/${thread}/runs`, {
      body: { message: "Look.", images: { mediaType: "image/png", data: PNG } },
    });
    expect(notArray).toMatchObject({ status: 400, body: { error: { code: "images-invalid" } } });
    const state = await call(vault.server, "GET", `/v1/threads/${thread}`);
    expect(state.body).toMatchObject({ status: "idle", lastEventId: 0 });
  });

  it("an image over the tenant's request size is a 413 body-too-large", async () => {
    const id = `img-${randomUUID()}`;
    expect((await call(vault.server, "POST", "/v1/threads", { tenant: "bob", body: { id } })).status).toBe(
      201,
    );
    const refused = await call(vault.server, "POST", `/v1/threads/${id}/runs`, {
      tenant: "bob",
      body: { message: "Look.", images: [{ mediaType: "image/png", data: PNG.repeat(8) }] },
    });
    expect(refused).toMatchObject({ status: 413, body: { error: { code: "body-too-large" } } });
  });

  it("AG-UI: an image part of the user message reaches the model; a bad one is a 400 naming it", async () => {
    const threadId = `agui-img-${randomUUID()}`;
    vault.replies.push({ content: "A pixel again." });
    const before = vault.model.requests.length;
    const post = (content: unknown) =>
      fetch(`${vault.server.url}/v1/agui`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${TOKENS.alice}`,
          "content-type": "application/json",
          accept: "text/event-stream",
        },
        body: JSON.stringify({
          threadId,
          runId: randomUUID(),
          messages: [{ id: "m1", role: "user", content }],
        }),
      });
    const response = await post([
      { type: "text", text: "What is this?" },
      { type: "image", source: { type: "data", value: PNG, mimeType: "image/png" } },
    ]);
    expect(response.status).toBe(200);
    const types: string[] = [];
    await readSse(response, (message) => {
      types.push(message.event ?? "");
      return message.event === "RUN_FINISHED" || message.event === "RUN_ERROR";
    });
    expect(types.at(-1)).toBe("RUN_FINISHED");
    expect(imageUrls(vault.model.requests.slice(before)[0]!)).toEqual([`data:image/png;base64,${PNG}`]);

    const bad = await post([
      { type: "text", text: "And this?" },
      { type: "image", source: { type: "data", value: PNG, mimeType: "image/tiff" } },
    ]);
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({
      error: {
        code: "images-invalid",
        message: expect.stringMatching(/content images\[0\]\.mediaType must be one of/),
      },
    });
  });
});
