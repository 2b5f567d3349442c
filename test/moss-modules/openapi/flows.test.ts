import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ScriptedLanguageModel } from "../../../engine/agent/scripted-language-model.ts";
import type { MossRuntime } from "../../../engine/runtime/moss-runtime.ts";
import { type PetServer, startPetServer } from "./pet-server.ts";
import { compilePets } from "./plugin-workspace.ts";

const CHOOSE = `name: pick_pet
description: Looks a pet up and decides whether it can be adopted.
steps:
  - name: start
    call_type: api
    params:
      endpoint: GET /pets/{petId}
    next: decide
  - name: decide
    call_type: choice
    params:
      instruction: Is this pet available for adoption?
      choices:
        - step: yes_step
          description: it is available
        - step: no_step
          description: it is not available
  - name: yes_step
    call_type: extract
    params:
      keys: [name, status]
    next: end
  - name: no_step
    call_type: llm
    params:
      system_prompt: Say sorry in one line.
      user_prompt: "Not available: {data}"
    next: end
`;

const BROKEN = `name: broken_lookup
description: Looks up a pet that does not exist; explains the failure.
on_error:
  call_type: llm
  params:
    system_prompt: You explain errors in one line.
    user_prompt: "Failed: {data}"
steps:
  - name: start
    call_type: api
    params:
      endpoint: GET /pets/{petId}
`;

const SQL = `name: sales_chart
description: Not runnable here.
steps:
  - name: start
    call_type: sql
`;

const model = new ScriptedLanguageModel([
  { content: "Rex is a good first dog." },
  { content: "1" },
  { content: "2" },
  { content: "Sorry, Tom has found a home." },
  { content: "There is no pet 999." },
]);
let server: PetServer;
let runtime: MossRuntime;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  server = await startPetServer({ kind: "none" });
  const compiled = await compilePets({
    serverUrl: server.url,
    pluginJson: { id: "pets", name: "Pet shelter", description: "Pets." },
    files: {
      "flows/pick_pet.yaml": CHOOSE,
      "flows/broken_lookup.yaml": BROKEN,
      "flows/sales_chart.yaml": SQL,
    },
    languageModel: model,
  });
  runtime = compiled.runtime;
  cleanup = compiled.cleanup;
});
afterAll(async () => {
  await cleanup?.();
  await server?.close();
});

describe("flows/*.yaml as methods of the service", () => {
  test("the prompt declares each flow with the arguments of its api steps", async () => {
    const prompt = await runtime.prompter().dumpModulePrompt();
    expect(prompt).toMatch(
      /pick_pet\(args\?: \{[\s\S]*petId\?: number;[\s\S]*question\?: string;\s*\}\): Promise<unknown>;/,
    );
    expect(prompt).toContain(
      "A flow: runs its steps (start: api, names: extract, summary: llm, end: none) on the host",
    );
  });

  test("api, extract and llm steps run on the host with the host's language model", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  return await moss.pets.adoptable_dogs({ tag: "dog", question: "Which dog should I meet first?" });
}`,
    });
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toBe("Rex is a good first dog.");
    const request = model.requests[0]!;
    expect(request.messages.at(-1)?.content).toBe("First dog: Rex. Question: Which dog should I meet first?");
    expect(server.requests.at(-1)?.url).toBe("/v1/pets?tag=dog");
  });

  test("a choice step follows the option the model picks", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  return [await moss.pets.pick_pet({ petId: 1 }), await moss.pets.pick_pet({ petId: 2 })];
}`,
    });
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toEqual([{ name: "Rex", status: "available" }, "Sorry, Tom has found a home."]);
  });

  test("on_error runs when a step fails, with the error as {data}", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  return await moss.pets.broken_lookup({ petId: 999 });
}`,
    });
    expect(execution.returns).toBe("There is no pet 999.");
    expect(model.requests.at(-1)?.messages.at(-1)?.content).toBe(
      'Failed: HTTP 404 Not Found from GET /pets/{petId}: {"message":"no pet 999"}',
    );
  });

  test("sql and render steps fail with a clear 'not supported' error model code can catch", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  try { await moss.pets.sales_chart(); return "ran"; } catch (error) { return (error as Error).message; }
}`,
    });
    expect(execution.returns).toBe(
      'flow sales_chart, step start: call_type "sql" is not supported by moss-ts (write the step as code instead)',
    );
  });
});
