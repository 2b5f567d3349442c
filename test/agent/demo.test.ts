// `npm run demo` against a server that passes the model's tool calls through as text (llama-server without a
// tool-call parser, chatml templates): the code must run and show, not end silently as an "answer".
import { spawn } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "./fake-openai-server.ts";

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function runDemo(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--no-node-snapshot", "--import", "tsx", "examples/sphero/demo.ts"],
      {
        env: { PATH: process.env.PATH ?? "", ...env },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (out += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out }));
  });
}

describe("npm run demo against a server without a tool-call parser", () => {
  // A whole demo process (tsx transform, compile, sandbox) boots here: minutes on a loaded 2-core machine.
  it("runs the <tool_call> the model wrote as text and shows the result", { timeout: 240_000 }, async () => {
    const code =
      "async function main(moss: Moss) {\n  await moss.body.roll(0, 120, 1);\n  moss.face.draw(SMILE);\n  console.log(moss.face.render());\n}";
    server = await startFakeOpenAIServer([
      { content: `<tool_call>\n${JSON.stringify({ name: "moss", arguments: { code } })}\n</tool_call>` },
      { content: "Rolled forward and smiled." },
    ]);
    const { code: exit, out } = await runDemo({ OPENAI_BASE_URL: server.baseUrl, MOSS_MODEL: "local" });
    expect(out).toContain("── code · step 1 ──");
    expect(out).toContain("── result · ok");
    expect(out).toContain("Rolled forward and smiled.");
    expect(exit).toBe(0);
    expect(server.requests[0]!.body.max_tokens).toBeGreaterThan(0);
  });
});
