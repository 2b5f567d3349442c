import { readFile } from "node:fs/promises";
import { afterEach, describe, expect, test } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { runMoss } from "../helpers/moss-cli.ts";

const CAMERA = "test/fixtures/images/camera-context.ts";
const RED_DOT = "test/fixtures/images/red-dot.png";
let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("moss agent --image", () => {
  test("sends each image file with the task as an image part; a file that is not an image is refused", async () => {
    server = await startFakeOpenAIServer([{ content: "A red square." }]);
    const env = { OPENAI_API_KEY: "k" };
    const base = [
      "agent",
      CAMERA,
      "What is in the picture?",
      "--base-url",
      server.baseUrl,
      "--model",
      "gpt-test",
    ];
    const result = await runMoss([...base, "--image", RED_DOT, "--image", RED_DOT], { env });
    expect(result.stderr).not.toContain("Error");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("A red square.");
    const parts = server.requests[0]!.body.messages[1].content;
    const url = `data:image/png;base64,${(await readFile(RED_DOT)).toString("base64")}`;
    expect(parts).toEqual([
      { type: "text", text: "What is in the picture?" },
      { type: "image_url", image_url: { url } },
      { type: "image_url", image_url: { url } },
    ]);
    const refused = await runMoss([...base, "--image", "package.json"], { env });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("package.json: not an image file");
    expect(server.requests).toHaveLength(1);
  });
});
