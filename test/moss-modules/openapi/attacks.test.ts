import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { MossRuntime } from "../../../engine/runtime/moss-runtime.ts";
import type { Execution } from "../../../engine/types.ts";
import { type PetServer, startPetServer } from "./pet-server.ts";
import { compilePets } from "./plugin-workspace.ts";

const KEY = "sk-live-the-model-must-never-see-this";
let server: PetServer;
let elsewhere: Server;
let elsewhereUrl: string;
const elsewhereHits: string[] = [];
let runtime: MossRuntime;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  server = await startPetServer({ kind: "header", name: "X-Api-Key", value: KEY });
  elsewhere = createServer((request, response) => {
    elsewhereHits.push(`${request.method} ${request.url} ${JSON.stringify(request.headers)}`);
    response.end("stolen");
  });
  await new Promise<void>((resolve) => elsewhere.listen(0, "127.0.0.1", resolve));
  elsewhereUrl = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}`;
  const compiled = await compilePets({
    serverUrl: server.url,
    pluginJson: {
      id: "pets",
      name: "Pet shelter",
      description: "Pets.",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: plugin.json's own ${ENV} syntax
      auth: { type: "header", args: { "X-Api-Key": "${PETS_ATTACK_KEY}" } },
    },
    credentials: { "X-Api-Key": KEY },
  });
  runtime = compiled.runtime;
  cleanup = compiled.cleanup;
});

afterAll(async () => {
  await cleanup?.();
  await server.close();
  elsewhere.closeAllConnections();
  await new Promise<void>((resolve) => elsewhere.close(() => resolve()));
});

async function run(code: string): Promise<Execution> {
  const execution = await runtime.execute({ code });
  expect(JSON.stringify(execution)).not.toContain(KEY);
  expect(runtime.dumpStdOutput()).not.toContain(KEY);
  return execution;
}

describe("model code against an OpenAPI service: credentials stay on the host, calls stay on the declared origin", () => {
  test("the service object shows only its operations: no token, no base URL, no closure", async () => {
    const execution = await run(`async function main(moss: Moss) {
  const pets = moss.pets as any;
  const seen: Record<string, unknown> = {};
  for (const name of ["token", "credentials", "secrets", "headers", "baseUrl", "options", "call", "prototype", "onDestroy"]) {
    try { seen[name] = typeof pets[name]; } catch (error) { seen[name] = (error as Error).message; }
  }
  let text = "";
  try { text = JSON.stringify(pets) + String(pets.getPet); } catch (error) { text = (error as Error).message; }
  console.log(moss.pets);
  return { seen, text, keys: Object.keys(pets), ownRealm: pets.constructor === Object };
}`);
    expect(execution.error).toBeUndefined();
    const returns = execution.returns as { seen: Record<string, string>; keys: string[] };
    for (const value of Object.values(returns.seen)) expect(value).toMatch(/undefined|not available/);
    expect((execution.returns as { ownRealm: boolean }).ownRealm).toBe(true);
    expect(returns.keys.every((key) => /^[a-z][A-Za-z_]*$/.test(key))).toBe(true);
  });

  test("a server that echoes the request gives the model [redacted] instead of the key", async () => {
    const execution = await run(`async function main(moss: Moss) {
  return await moss.pets.whoami();
}`);
    expect(execution.error).toBeUndefined();
    const echoed = execution.returns as { headers: Record<string, string> };
    expect(echoed.headers["x-api-key"]).toBe("[redacted]");
  });

  test("fetch and other network doors do not exist inside the sandbox", async () => {
    const execution = await run(`async function main(moss: Moss) {
  const g = globalThis as any;
  return [typeof g.fetch, typeof g.XMLHttpRequest, typeof g.WebSocket, typeof g.require, typeof g.process];
}`);
    expect(execution.returns).toEqual(["undefined", "undefined", "undefined", "undefined", "undefined"]);
  });

  test("a redirect to another origin is refused and the other origin is never contacted", async () => {
    const execution = await run(`async function main(moss: Moss) {
  try { return await moss.pets.moved({ to: "${elsewhereUrl}/steal" }); }
  catch (error) { return (error as Error).message; }
}`);
    expect(execution.returns).toBe(
      `GET /moved: the server redirected to another origin; only ${server.origin} is reachable`,
    );
    expect(elsewhereHits).toEqual([]);
  });

  test("a same-origin redirect is followed", async () => {
    const execution = await run(`async function main(moss: Moss) {
  return await moss.pets.moved({ to: "/v1/pets/1" });
}`);
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toMatchObject({ id: 1, name: "Rex" });
  });

  test("path arguments cannot climb out of the route or reach another origin", async () => {
    const before = server.requests.length;
    const execution = await run(`async function main(moss: Moss) {
  const attempts = ["..", ".", "%2e%2e", "../../whoami", "//${elsewhereUrl.slice(7)}/x", "1?x=1#y", "${elsewhereUrl}"];
  const results: string[] = [];
  for (const petId of attempts) {
    try { await moss.pets.getPet({ petId: petId as any }); results.push("sent " + petId); }
    catch (error) { results.push((error as Error).name + ": " + (error as Error).message); }
  }
  return results;
}`);
    const results = execution.returns as string[];
    expect(results.slice(0, 2)).toEqual([
      'TypeError: argument petId must not be empty, "." or ".."',
      'TypeError: argument petId must not be empty, "." or ".."',
    ]);
    const sent = server.requests.slice(before).map((request) => request.url);
    for (const url of sent) expect(url).toMatch(/^\/v1\/pets\/[^/]+$/);
    expect(elsewhereHits).toEqual([]);
  });

  test("a header argument cannot smuggle another header or override the credential", async () => {
    const before = server.requests.length;
    const execution = await run(`async function main(moss: Moss) {
  const results: string[] = [];
  for (const id of ["a\\r\\nX-Evil: 1", "b\\nX-Api-Key: other", "c\\u0000d"]) {
    try { await moss.pets.listPets({ "X-Request-Id": id }); results.push("sent"); }
    catch (error) { results.push((error as Error).message); }
  }
  return results;
}`);
    expect(execution.returns).toEqual([
      "header X-Request-Id must not contain line breaks or NUL",
      "header X-Request-Id must not contain line breaks or NUL",
      "header X-Request-Id must not contain line breaks or NUL",
    ]);
    expect(server.requests.length).toBe(before);
  });

  test("a query argument cannot spread extra query parameters", async () => {
    const before = server.requests.length;
    const execution = await run(`async function main(moss: Moss) {
  const list = moss.pets.listPets as (args: unknown) => Promise<unknown>;
  try { await list({ limit: { "X-Api-Key": "mine", admin: "1" } }); return "sent"; }
  catch (error) { return (error as Error).message; }
}`);
    expect(execution.returns).toBe("argument limit must be a string, number or boolean");
    expect(server.requests.length).toBe(before);
  });

  test("arguments with extra keys (a header, a URL) are refused, not forwarded", async () => {
    const execution = await run(`async function main(moss: Moss) {
  const whoami = moss.pets.whoami as (args: unknown) => Promise<unknown>;
  try { await whoami({ headers: { "X-Api-Key": "mine" }, url: "${elsewhereUrl}" }); return "sent"; }
  catch (error) { return (error as Error).message; }
}`);
    expect(execution.returns).toBe('whoami: unknown argument "headers" (arguments: none)');
  });

  test("errors of failed calls never carry the key, even when the server echoes it", async () => {
    const execution = await run(`async function main(moss: Moss) {
  try { await moss.pets.getPet({ petId: 424242 }); } catch (error) { return (error as Error).message; }
}`);
    expect(execution.returns).toBe(
      'HTTP 500 Internal Server Error from GET /pets/{petId}: {"message":"debug dump","x-api-key":"[redacted]"}',
    );
  });
});
