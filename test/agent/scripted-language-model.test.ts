import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ScriptedLanguageModel } from "../../engine/agent/scripted-language-model.ts";
import { MossError } from "../../engine/errors.ts";

describe("ScriptedLanguageModel", () => {
  it("replays content and tool calls in order, streams content, and records every request", async () => {
    const model = new ScriptedLanguageModel([
      {
        content: "thinking about it",
        toolCalls: [{ name: "moss", arguments: { code: "async function main() {}" } }],
      },
      { content: "done", inputTokens: 5, outputTokens: 2, cost: 0.01 },
    ]);
    const deltas: string[] = [];
    const first = await model.stream({ messages: [{ role: "user", content: "go" }] }, (delta) =>
      deltas.push(delta),
    );
    expect(deltas.join("")).toBe("thinking about it");
    expect(deltas.length).toBe(3);
    expect(first.toolCalls).toEqual([
      { id: "call_1_1", name: "moss", arguments: '{"code":"async function main() {}"}' },
    ]);
    expect(first.finishReason).toBe("tool-calls");
    const second = await model.generate({ messages: [{ role: "user", content: "again" }] });
    expect(second).toMatchObject({
      content: "done",
      inputTokens: 5,
      outputTokens: 2,
      cost: 0.01,
      finishReason: "stop",
    });
    expect(model.requests.map((request) => request.messages[0]!.content)).toEqual(["go", "again"]);
    expect(model.remaining).toBe(0);
  });

  it("errors clearly when the script runs out", async () => {
    const model = new ScriptedLanguageModel([{ content: "only" }], { source: "demo.json" });
    await model.generate({ messages: [] });
    const error = await model.generate({ messages: [] }).catch((caught: unknown) => caught);
    expect(MossError.is(error, "model-request")).toBe(true);
    expect((error as Error).message).toBe(
      "ScriptedLanguageModel: demo.json has 1 recorded response(s); request #2 has none.",
    );
  });

  it("loads a recording from JSON, and names the file when it is not one", async () => {
    const directory = await mkdtemp(join(tmpdir(), "moss-scripted-"));
    try {
      const path = join(directory, "run.json");
      await writeFile(path, JSON.stringify({ model: "recorded-gpt", responses: [{ content: "hi" }] }));
      const model = await ScriptedLanguageModel.fromFile(path);
      expect(model.model).toBe("recorded-gpt");
      expect((await model.generate({ messages: [] })).content).toBe("hi");
      const bad = join(directory, "bad.json");
      await writeFile(bad, JSON.stringify({ answers: [] }));
      await expect(ScriptedLanguageModel.fromFile(bad)).rejects.toThrowError(/bad\.json: a recording is/);
      await expect(ScriptedLanguageModel.fromFile(join(directory, "missing.json"))).rejects.toThrowError(
        /missing\.json/,
      );
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});
