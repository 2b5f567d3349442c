import { afterAll, beforeAll, expect, test } from "vitest";
import type { MossRuntime } from "../../../engine/runtime/moss-runtime.ts";
import { type PetServer, startPetServer } from "./pet-server.ts";
import { compilePets } from "./plugin-workspace.ts";

const KEY = "sk-process-sandbox-key-0001";
let server: PetServer;
let runtime: MossRuntime;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  server = await startPetServer({ kind: "header", name: "X-Api-Key", value: KEY });
  const compiled = await compilePets({
    serverUrl: server.url,
    credentials: { "X-Api-Key": KEY },
    sandbox: "process",
  });
  runtime = compiled.runtime;
  cleanup = compiled.cleanup;
});
afterAll(async () => {
  await cleanup?.();
  await server?.close();
});

test("in the default process sandbox: calls work, errors are catchable, the key never crosses", async () => {
  const execution = await runtime.execute({
    code: `async function main(moss: Moss) {
  const pet = await moss.pets.getPet({ petId: 1 });
  let failure = "";
  try { await moss.pets.getPet({ petId: 77 }); } catch (error) { failure = (error as Error).name; }
  let smuggled = "";
  try { await moss.pets.listPets({ "X-Request-Id": "x\\r\\nX-Api-Key: mine" }); } catch (error) { smuggled = (error as Error).message; }
  const echoed = await moss.pets.whoami();
  return { name: pet.name, failure, smuggled, echoed };
}`,
  });
  expect(execution.error).toBeUndefined();
  expect(execution.returns).toMatchObject({
    name: "Rex",
    failure: "HttpError",
    smuggled: "header X-Request-Id must not contain line breaks or NUL",
  });
  expect(JSON.stringify(execution)).not.toContain(KEY);
});
