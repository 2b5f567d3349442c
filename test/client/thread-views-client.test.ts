// moss-ts/client reads what the studio shows beside a thread's events (issue 26): the session's data fields, the
// module prompt and a message's image, against a real `moss serve` core on PGlite (the vault module).
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { RequestHandler, type ThreadPrompt, type ThreadSession } from "../../client/index.ts";
import { call, code, readEvents, runSettles, TOKENS, useVaultServer } from "../server/server-harness.ts";

// A 1×1 PNG.
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

describe("moss-ts/client: getSession, getPrompt, getImage", () => {
  const vault = useVaultServer("moss-client-views-");
  const handler = (threadId: string, tenant: keyof typeof TOKENS = "alice") =>
    new RequestHandler({ bearerToken: TOKENS[tenant], serverUrl: vault.server.url!, threadId });

  it("reads a thread's data fields after a run, its prompt and an attached image; another tenant's thread throws thread-not-found", async () => {
    const threadId = `client-views-${randomUUID()}`;
    expect((await call(vault.server, "POST", "/v1/threads", { body: { id: threadId } })).status).toBe(201);
    const alice = handler(threadId);
    const before: ThreadSession = await alice.getSession();
    expect(before).toEqual({ fields: {} });

    vault.replies.push(code('  moss.notes.push("noted by the client");'), { content: "Noted." });
    await call(vault.server, "POST", `/v1/threads/${threadId}/runs`, {
      body: { message: "Note it.", images: [{ mediaType: "image/png", data: PNG }] },
    });
    const events = await readEvents(vault.server, threadId, runSettles);

    const session = await alice.getSession();
    expect(session.fields).toEqual({ notes: '[\n  "noted by the client"\n]' });
    expect(typeof session.updatedAt).toBe("string");

    const prompt: ThreadPrompt = await alice.getPrompt();
    expect(prompt.prompt).toContain("notes: string[] = [];");
    expect(prompt.prompt).not.toContain("__moss_compile__");

    const task = events.find((event) => event.event === "message" && event.data.message.images)!;
    const image = await alice.getImage(task.data.message.id, 0);
    expect(image.type).toBe("image/png");
    expect(Buffer.from(await image.arrayBuffer()).equals(Buffer.from(PNG, "base64"))).toBe(true);
    await expect(alice.getImage(task.data.message.id, 1)).rejects.toMatchObject({
      code: "image-not-found",
      status: 404,
    });

    // The same thread id through bob's token: not bob's thread.
    const bob = handler(threadId, "bob");
    for (const read of [
      () => bob.getSession(),
      () => bob.getPrompt(),
      () => bob.getImage(task.data.message.id, 0),
    ]) {
      await expect(read()).rejects.toMatchObject({ code: "thread-not-found", status: 404 });
    }
    // Another thread of alice's, named explicitly, through the same handler.
    await expect(alice.getSession(`client-views-none-${randomUUID()}`)).rejects.toMatchObject({
      code: "thread-not-found",
    });
  });
});
