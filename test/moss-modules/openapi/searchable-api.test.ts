import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MossError } from "../../../engine/errors.ts";
import type { MossRuntime } from "../../../engine/runtime/moss-runtime.ts";
import {
  buildApiModel,
  type OperationMatch,
  openApiDeclaration,
} from "../../../moss-modules/openapi/index.ts";
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
    maxIndexOperations: 5,
    include: ["getPet"],
  });
  runtime = compiled.runtime;
  cleanup = compiled.cleanup;
});
afterAll(async () => {
  await cleanup?.();
  await server?.close();
});

describe("a very large API: tags with counts and search(query) in the prompt, every operation still callable", () => {
  test("the prompt lists tags with counts, search and describe, and no other operation", async () => {
    const prompt = await runtime.prompter().dumpModulePrompt();
    expect(prompt).toContain("This API has 9 operations, each a method of this object but not listed here");
    expect(prompt).toMatch(/Operations by tag \(count\):\n \* pets \(\d+\), account \(\d+\)/);
    expect(prompt).toContain("search(query: string, limit?: number): PetShelterOperationMatch[];");
    expect(prompt).toContain("describe(name: string): string;");
    expect(prompt).toContain("interface PetShelterOperationMatch {");
    expect(prompt).toMatch(/getPet\(args: \{[\s\S]*petId: number;/);
    for (const hidden of ["listPets", "adopt", "createPet"])
      expect(prompt).not.toMatch(new RegExp(`\\b${hidden}[(:]`));
    expect(prompt).not.toContain("interface PetShelterOperations");
  });

  test("model code finds an operation it was never shown with search() and calls it against the server", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const found = moss.pets.search("list pets");
  const dogs = await moss.pets.listPets({ tag: "dog" });
  return { first: found[0], dogs: dogs.map((dog) => dog.name) };
}`,
    });
    expect(execution.error).toBeUndefined();
    const returns = execution.returns as { first: OperationMatch; dogs: string[] };
    expect(returns.first).toEqual({
      name: "listPets",
      tag: "pets",
      summary: "List the pets of the shelter.",
      signature:
        'listPets(args?: { limit?: number; tag?: "dog" | "cat" | "bird"; "X-Request-Id"?: string }): Promise<Pet[]>',
    });
    expect(returns.dogs).toEqual(["Rex", "Bello"]);
  });

  test("the checker holds calls to operations the prompt never showed to their types", async () => {
    const diagnostics = await runtime.typecheck(`async function main(moss: Moss) {
  await moss.pets.adopt({ body: { petId: "three", name: "Ada" } });
  moss.pets.search(42);
  await moss.pets.noSuchOperation();
}`);
    const messages = diagnostics.map((diagnostic) => diagnostic.message).join("\n");
    expect(messages).toMatch(/'string' is not assignable to type 'number'/);
    expect(messages).toMatch(/'number' is not assignable to parameter of type 'string'/);
    expect(messages).toMatch(/Property 'noSuchOperation' does not exist/);
  });
});

const DOCUMENT = {
  openapi: "3.0.3",
  info: { title: "Dotted", version: "1" },
  paths: {
    "/things": {
      get: {
        operationId: "things.find-by-tag",
        summary: "Find things.",
        responses: { "200": { description: "ok" } },
      },
      post: {
        operationId: "things.create",
        summary: "Create a thing.",
        responses: { "201": { description: "ok" } },
      },
    },
  },
};

describe("include", () => {
  const model = buildApiModel(DOCUMENT, "Dotted");

  test("accepts an operationId as well as a method name", () => {
    const byId = openApiDeclaration(model, {
      name: "Dotted",
      maxOperations: 1,
      include: ["things.find-by-tag"],
    });
    const byName = model.operations.find((operation) => operation.operationId === "things.create")!.name;
    const both = openApiDeclaration(model, { name: "Dotted", maxOperations: 1, include: [byName] });
    const findName = model.operations.find(
      (operation) => operation.operationId === "things.find-by-tag",
    )!.name;
    expect(byId.text).toMatch(new RegExp(`\\n {2}${findName}\\(\\): Promise<void>;`));
    expect(both.text).toMatch(new RegExp(`\\n {2}${byName}\\(\\): Promise<void>;`));
  });

  test("an unknown name is an error naming it", () => {
    const attempt = () =>
      openApiDeclaration(model, { name: "Dotted", maxOperations: 1, include: ["thingsDelete"] });
    expect(attempt).toThrow(MossError);
    expect(attempt).toThrow(/include: no operation named "thingsDelete"/);
  });
});
