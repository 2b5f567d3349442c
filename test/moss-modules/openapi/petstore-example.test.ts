import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, test } from "vitest";
import { MossAgent } from "../../../engine/agent/moss-agent.ts";
import { ScriptedLanguageModel } from "../../../engine/agent/scripted-language-model.ts";
import { startPetStore } from "../../../examples/petstore-plugin/server.ts";

const MODULE = fileURLToPath(new URL("../../../examples/petstore-plugin/context.ts", import.meta.url));
const RECORDING = fileURLToPath(
  new URL("../../../examples/petstore-plugin/recorded/adopt-a-dog.json", import.meta.url),
);
const KEY = "example-key-the-model-never-sees";
let store: Awaited<ReturnType<typeof startPetStore>>;

beforeAll(async () => {
  store = await startPetStore(KEY);
  process.env.PETSTORE_API_KEY = KEY;
  process.env.PETSTORE_URL = store.url;
});
afterAll(async () => {
  delete process.env.PETSTORE_API_KEY;
  delete process.env.PETSTORE_URL;
  await store.close();
});

test("examples/petstore-plugin: the recorded model adopts a dog through the plugin, recovering from a type error", async () => {
  const model = await ScriptedLanguageModel.fromFile(RECORDING);
  const agent = new MossAgent({
    model,
    modulePath: MODULE,
    maxSteps: 6,
    compiler: { sandbox: "in-process" },
  });
  try {
    const result = await agent.run("Adopt an available dog for Ada Lovelace.");
    expect(result.stopReason).toBe("answer");
  } finally {
    await agent.close();
  }
  expect(store.orders).toEqual([{ id: 1, petId: 1, customer: "Ada Lovelace" }]);
  const sent = JSON.stringify(model.requests);
  expect(sent).toContain("Object literal may only specify known properties, and 'name' does not exist");
  expect(sent).toContain("placeOrder(args: {");
  expect(sent).not.toContain(KEY);
});
