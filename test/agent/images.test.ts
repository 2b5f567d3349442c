// Images in the conversation: a task's images and those the model's code shows with `moss.show` reach a vision
// model as image parts (the real openai client against a local server), and the conversation tree keeps them.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { MossAgent } from "../../engine/agent/moss-agent.ts";
import { OpenAILanguageModel, SHOWN_IMAGES_TEXT } from "../../engine/agent/openai-language-model.ts";
import { MossError } from "../../engine/errors.ts";
import { imageFromFile } from "../../engine/image-content.ts";
import { FileConversationStore } from "../../engine/model/conversation-store.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { BLUE_DOT } from "../fixtures/images/camera-context.ts";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "./fake-openai-server.ts";

const MODULE = "test/fixtures/images/camera-context.ts";
const RED_DOT = "test/fixtures/images/red-dot.png";
let server: FakeOpenAIServer | undefined;
let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-images-"));
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  await rm(directory, { recursive: true, force: true });
});
afterAll(async () => {
  await closeSharedSandboxes();
});

const tool = (code: string) => ({ name: "moss", arguments: JSON.stringify({ code }) });

function agentFor(baseUrl: string, sessionId?: string): MossAgent {
  return new MossAgent({
    model: new OpenAILanguageModel({ baseUrl, apiKey: "k", model: "gpt-test", maxRetries: 0, env: {} }),
    modulePath: MODULE,
    compiler: { sandbox: "in-process" },
    hostSetup: false,
    ...(sessionId === undefined
      ? {}
      : { sessionId, conversationStore: new FileConversationStore(join(directory, "sessions")) }),
  });
}

describe("images in the conversation", () => {
  it("a task's images go to the model as image_url parts with data URLs, and the tree keeps them", async () => {
    server = await startFakeOpenAIServer([{ content: "A red square." }]);
    const agent = agentFor(server.baseUrl, "s1");
    const red = await readFile(RED_DOT);
    const result = await agent.run({
      task: "What is in the picture?",
      images: [{ mediaType: "image/png", data: red, detail: "low", name: "red-dot.png" }],
    });
    await agent.close();
    expect(result).toMatchObject({ stopReason: "answer", answer: "A red square." });
    const user = server.requests[0]!.body.messages[1];
    expect(user).toEqual({
      role: "user",
      content: [
        { type: "text", text: "What is in the picture?" },
        {
          type: "image_url",
          image_url: { url: `data:image/png;base64,${red.toString("base64")}`, detail: "low" },
        },
      ],
    });
    // The stored tree holds the image (media type, detail, bytes), in a new process too.
    const stored = JSON.parse(await readFile(join(directory, "sessions", "s1.conversation.json"), "utf8"));
    expect(stored.messages[0].images).toEqual([
      { mediaType: "image/png", detail: "low", name: "red-dot.png", data: red.toString("base64") },
    ]);
    const again = await agentFor(server.baseUrl, "s1").load();
    expect(again.thread()[0]!.images).toEqual(stored.messages[0].images);
  });

  it("an image URL and a file read with imageFromFile are sent as they are; plain text tasks stay plain", async () => {
    server = await startFakeOpenAIServer([{ content: "Two dots." }, { content: "Fine." }]);
    const agent = agentFor(server.baseUrl);
    const file = await imageFromFile(RED_DOT);
    expect(file).toMatchObject({ mediaType: "image/png", name: "red-dot.png" });
    await agent.run({
      task: "Compare.",
      images: [file, { mediaType: "image/jpeg", url: "https://example.com/dot.jpg", detail: "high" }],
    });
    await agent.run("And now?");
    await agent.close();
    const parts = server.requests[0]!.body.messages[1].content;
    expect(parts[1].image_url.url).toMatch(/^data:image\/png;base64,iVBOR/);
    expect(parts[2]).toEqual({
      type: "image_url",
      image_url: { url: "https://example.com/dot.jpg", detail: "high" },
    });
    expect(server.requests[1]!.body.messages.at(-1)).toEqual({ role: "user", content: "And now?" });
  });

  it("a service's image passed to moss.show reaches the model in the next request, after the tool message", async () => {
    server = await startFakeOpenAIServer([
      {
        content: "",
        toolCalls: [
          tool(
            "async function main(moss: Moss) {\n  const picture = await moss.camera.snap();\n  moss.show(picture);\n  return picture.name;\n}",
          ),
        ],
      },
      { content: "The desk is blue." },
    ]);
    const agent = agentFor(server.baseUrl);
    const result = await agent.run("Look at the desk.");
    await agent.close();
    expect(result).toMatchObject({ stopReason: "answer", answer: "The desk is blue." });
    const messages = server.requests[1]!.body.messages;
    expect(messages.map((message: { role: string }) => message.role)).toEqual([
      "system",
      "user",
      "assistant",
      "tool",
      "user",
    ]);
    expect(messages[3].content).toContain("<images>");
    expect(messages[4]).toEqual({
      role: "user",
      content: [
        { type: "text", text: SHOWN_IMAGES_TEXT },
        {
          type: "image_url",
          image_url: { url: `data:image/png;base64,${Buffer.from(BLUE_DOT).toString("base64")}` },
        },
      ],
    });
    const observation = agent.conversation.thread().find((message) => message.role === "tool")!;
    expect(observation.images).toEqual([
      { mediaType: "image/png", name: "desk.png", data: Buffer.from(BLUE_DOT).toString("base64") },
    ]);
    // The system prompt tells the model about moss.show (the Moss base declares it).
    expect(messages[0].content).toContain("show: (image:");
  });

  it("moss.show refuses what is not an image inside the run, and run() refuses a bad task image", async () => {
    server = await startFakeOpenAIServer([
      {
        content: "",
        toolCalls: [
          tool(
            'async function main(moss: Moss) {\n  moss.show({ mediaType: "text/plain" as "image/png", data: "aGk=" });\n}',
          ),
        ],
      },
      { content: "That was not an image." },
    ]);
    const agent = agentFor(server.baseUrl);
    const events: string[] = [];
    await agent.run("Show text.", {
      onEvent: (event) => {
        if (event.type === "execution") events.push(event.observation);
      },
    });
    expect(events[0]).toContain("mediaType must be one of image/png");
    const refused = await agent
      .run({ task: "Look.", images: [{ mediaType: "image/png" }] })
      .catch((error: unknown) => error);
    expect(MossError.is(refused) && refused.code).toBe("invalid-argument");
    expect((refused as Error).message).toContain("images[0] needs either data (its bytes) or url");
    await agent.close();
  });
});
