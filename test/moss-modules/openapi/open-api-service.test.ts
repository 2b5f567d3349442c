import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { MossRuntime } from "../../../engine/runtime/moss-runtime.ts";
import { type PetServer, startPetServer } from "./pet-server.ts";
import { compilePets } from "./plugin-workspace.ts";

const KEY = "sk-test-very-secret-1234";
let server: PetServer;
let shared: MossRuntime;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  server = await startPetServer({ kind: "header", name: "X-Api-Key", value: KEY });
  shared = await compiled({});
});
afterAll(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
  await server.close();
});

async function compiled(options: Parameters<typeof compilePets>[0]): Promise<MossRuntime> {
  const result = await compilePets({ serverUrl: server.url, credentials: { "X-Api-Key": KEY }, ...options });
  cleanups.push(result.cleanup);
  return result.runtime;
}

/** Most tests share one runtime: compiling is the slow part, and these tests keep no data in \`moss\`. */
async function pets(): Promise<MossRuntime> {
  return shared;
}

describe("an OpenAPI plugin as a typed service", () => {
  test("the prompt shows the plugin's name, description and the typed operations", async () => {
    const runtime = await pets();
    const prompt = await runtime.prompter().dumpModulePrompt();
    expect(prompt).toContain("Pet shelter: Lists the shelter's pets");
    expect(prompt).toContain("listPets(args?: {");
    expect(prompt).toContain('tag?: "dog" | "cat" | "bird";');
    expect(prompt).toContain("}): Promise<Pet[]>;");
    expect(prompt).toContain("type Pet = NewPet & {");
    expect(prompt).toContain("Pattern: `^[A-Za-z ]{2,40}$`.");
    expect(prompt).not.toContain(KEY);
    expect(prompt).not.toContain("PETS_API_KEY");
    expect(prompt).not.toContain("biome-ignore");
  });

  test("model code lists, creates and reads back pets with JSON bodies", async () => {
    const runtime = await pets();
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const dogs = await moss.pets.listPets({ tag: "dog", limit: 5, "X-Request-Id": "r-1" });
  const created = await moss.pets.createPet({ body: { name: "Fido", tag: "dog" } });
  const again = await moss.pets.getPet({ petId: created.id });
  return { dogs: dogs.map((dog) => dog.name), created: again.name, status: again.status };
}`,
    });
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toEqual({ dogs: ["Rex", "Bello"], created: "Fido", status: "available" });
    const listed = server.requests.find((request) => request.url.startsWith("/v1/pets?"))!;
    expect(listed.url).toBe("/v1/pets?limit=5&tag=dog");
    expect(listed.headers["x-request-id"]).toBe("r-1");
  });

  test("form-urlencoded and multipart bodies reach the server as such", async () => {
    const runtime = await pets();
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const adoption = await moss.pets.adopt({ body: { petId: 3, name: "Ada Lovelace" } });
  const photo = await moss.pets.uploadPhoto({ petId: 1, body: { file: "12345", caption: "Rex asleep" } });
  return { adoption, photo };
}`,
    });
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toEqual({
      adoption: { state: "accepted", petId: 3 },
      photo: { bytes: 5, caption: "Rex asleep" },
    });
  });

  test("a non-2xx answer is an HttpError model code can catch, with status, statusText and the parsed body", async () => {
    const runtime = await pets();
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  try {
    await moss.pets.getPet({ petId: 999 });
    return "no error";
  } catch (error) {
    const e = error as Error & { status: number; statusText: string; body: { message: string }; code: number };
    return { name: e.name, message: e.message, status: e.status, statusText: e.statusText, body: e.body, code: e.code };
  }
}`,
    });
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toEqual({
      name: "HttpError",
      message: 'HTTP 404 Not Found from GET /pets/{petId}: {"message":"no pet 999"}',
      status: 404,
      statusText: "Not Found",
      body: { message: "no pet 999" },
      code: 404,
    });
  });

  test("the type-checker holds model code to the generated types", async () => {
    const runtime = await pets();
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  await moss.pets.getPet({ petId: "one" });
  await moss.pets.listPets({ tag: "lizard" });
}`,
    });
    expect(execution.error?.kind).toBe("type");
    expect(execution.error?.message).toMatch(/Type 'string' is not assignable to type 'number'/);
    expect(execution.error?.message).toMatch(/"lizard"/);
  });

  test("unknown and missing arguments fail with a clear error, not a silent request", async () => {
    const runtime = await pets();
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const errors: string[] = [];
  for (const call of [() => moss.pets.getPet({} as any), () => moss.pets.listPets({ colour: "red" } as any)]) {
    try { await call(); } catch (error) { errors.push((error as Error).message); }
  }
  return errors;
}`,
    });
    expect(execution.returns).toEqual([
      "getPet: missing required argument petId",
      'listPets: unknown argument "colour" (arguments: limit, tag, X-Request-Id)',
    ]);
  });

  test("a 204 answer resolves to undefined and the operation without operationId is named from method and path", async () => {
    const runtime = await pets();
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const created = await moss.pets.createPet({ body: { name: "Short stay" } });
  const removed = await moss.pets.deletePetsByPetId({ petId: created.id });
  return removed === undefined;
}`,
    });
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toBe(true);
  });

  test("the response size cap ends a call with a clear error", async () => {
    const runtime = await compiled({ maxResponseBytes: 64 * 1024 });
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  try { await moss.pets.huge(); return "read"; } catch (error) { return (error as Error).message; }
}`,
    });
    expect(execution.returns).toBe("GET /huge: the response is larger than the limit of 65536 bytes");
  });
});
