import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { MossRuntime } from "../../../engine/runtime/moss-runtime.ts";
import { type PetServer, startPetServer } from "./pet-server.ts";
import { compilePets } from "./plugin-workspace.ts";

let server: PetServer;
let runtime: MossRuntime;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  server = await startPetServer({ kind: "none" });
  const compiled = await compilePets({
    serverUrl: server.url,
    pluginJson: { id: "pets", name: "Pet shelter", description: "Pets." },
    maxOperations: 3,
    include: ["getPet"],
  });
  runtime = compiled.runtime;
  cleanup = compiled.cleanup;
});
afterAll(async () => {
  await cleanup?.();
  await server?.close();
});

describe("a large API: compact index in the prompt, every operation known to the checker", () => {
  test("the prompt lists operations by tag with one-line summaries and declares only the included ones", async () => {
    const prompt = await runtime.prompter().dumpModulePrompt();
    expect(prompt).toContain("This API has 9 operations: too many to declare here.");
    expect(prompt).toContain(
      "/** [pets] List the pets of the shelter. */\n  listPets: typeof operations.listPets;",
    );
    expect(prompt).toContain("/** [account] Apply to adopt a pet. */\n  adopt: typeof operations.adopt;");
    expect(prompt).toContain("describe(name: string): string;");
    expect(prompt).toMatch(/getPet\(args: \{[\s\S]*petId: number;/);
    expect(prompt).not.toMatch(/listPets\(args/);
    expect(prompt).not.toContain("interface PetShelterOperations");
  });

  test("model code reads a declaration with describe() and calls an operation the prompt only indexed", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const text = moss.pets.describe("listPets");
  const dogs = await moss.pets.listPets({ tag: "dog" });
  return { text, dogs: dogs.map((dog) => dog.name) };
}`,
    });
    expect(execution.error).toBeUndefined();
    const returns = execution.returns as { text: string; dogs: string[] };
    expect(returns.text).toMatch(/^\/\*\*\n \* List the pets of the shelter\.[\s\S]*listPets\(args\?: \{/);
    expect(returns.dogs).toEqual(["Rex", "Bello"]);
  });

  test("the checker still holds calls to indexed operations to their types", async () => {
    const diagnostics = await runtime.typecheck(`async function main(moss: Moss) {
  await moss.pets.adopt({ body: { petId: "three", name: "Ada" } });
}`);
    expect(diagnostics.map((diagnostic) => diagnostic.message).join("\n")).toMatch(
      /'string' is not assignable to type 'number'/,
    );
  });

  test("describe() of an unknown name suggests close names", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  try { return moss.pets.describe("pet"); } catch (error) { return (error as Error).message; }
}`,
    });
    expect(execution.returns).toMatch(/^no operation or type named "pet" \(did you mean .*getPet.*\?\)$/);
  });
});
