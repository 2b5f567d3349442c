import { existsSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { bindMcp, MAX_TOOL_PAGES, mcpService } from "../../moss-modules/mcp/index.ts";
import { bindOpenApi, type OpenApiDocument, openApiService } from "../../moss-modules/openapi/index.ts";
import { MAX_TYPE_NODES } from "../../moss-modules/openapi/schema-to-type.ts";
import { startNotesServer } from "../moss-modules/mcp/notes-server.ts";
import { compileServices, eventually, HOSTILE_MCP_SERVER, scratchFolder } from "./upstream-rig.ts";

// Hostile upstreams: an MCP server or HTTP API that answers with costly schemas, floods, endless pages or never
// answers must not stall, exhaust or outlive the run on the host.

let scratch: Awaited<ReturnType<typeof scratchFolder>>;
beforeAll(async () => {
  scratch = await scratchFolder("upstream-attacks");
});
afterAll(async () => {
  await scratch?.remove();
});

const hostile = (mode: string, env: Record<string, string> = {}) => ({
  command: process.execPath,
  args: [HOSTILE_MCP_SERVER, mode],
  env,
});

describe("bind time: an upstream's declaration cannot stall the host", () => {
  test("MCP: layered $refs (8^10 nodes expanded) fail the bind with a located schema-too-large error", async () => {
    const bound = mcpService("Layered", hostile("layered-refs"), {
      typesFile: path.join(scratch.folder, "layered.api.ts"),
    });
    await expect(bound).rejects.toMatchObject({
      code: "schema-too-large",
      message: expect.stringMatching(
        new RegExp(
          `^MCP server \`.*\`: tool "layered": the schema expands to more than ${MAX_TYPE_NODES} nodes \\(through \\$ref #/\\$defs/l10`,
        ),
      ),
    });
    expect(existsSync(path.join(scratch.folder, "layered.api.ts"))).toBe(false);
  });

  test("OpenAPI: layered inline $refs fail the bind with a located schema-too-large error", async () => {
    const layers: Record<string, unknown> = { l0: { type: "string" } };
    for (let layer = 1; layer <= 10; layer++) {
      const properties: Record<string, unknown> = {};
      for (let index = 0; index < 8; index++) properties[`p${index}`] = { $ref: `#/x-layers/l${layer - 1}` };
      layers[`l${layer}`] = { type: "object", properties };
    }
    const document = {
      openapi: "3.0.3",
      info: { title: "Layered", version: "1" },
      servers: [{ url: "http://127.0.0.1:9/" }],
      "x-layers": layers,
      paths: {
        "/things": {
          get: {
            operationId: "listThings",
            responses: {
              "200": {
                description: "ok",
                content: { "application/json": { schema: { $ref: "#/x-layers/l10" } } },
              },
            },
          },
        },
      },
    } as unknown as OpenApiDocument;
    await expect(
      openApiService("Layered", document, { typesFile: path.join(scratch.folder, "layered-api.api.ts") }),
    ).rejects.toMatchObject({
      code: "schema-too-large",
      message: expect.stringContaining("#/x-layers/l10"),
    });
  });

  test(`MCP: a tool list that never stops paging ends after ${MAX_TOOL_PAGES} pages with a clear error`, async () => {
    await expect(
      mcpService("Endless", hostile("endless-pages"), {
        typesFile: path.join(scratch.folder, "endless.api.ts"),
      }),
    ).rejects.toThrow(`: cannot connect: the tool list has more than ${MAX_TOOL_PAGES} pages`);
  });
});

describe("MCP answers are bounded: size, schema work, broken connections", () => {
  let runtime: MossRuntime;
  beforeAll(async () => {
    runtime = await compileServices(
      scratch.folder,
      "in-process",
      [["hostile", "Hostile", path.join(scratch.folder, "hostile.api.ts")]],
      (compiler) =>
        bindMcp(compiler, "Hostile", hostile("tools"), {
          typesFile: path.join(scratch.folder, "hostile.api.ts"),
          maxResponseBytes: 256 * 1024,
          validationTimeoutMs: 500,
        }),
    );
  });
  afterAll(async () => {
    await runtime?.close();
  });

  test("a catastrophic outputSchema pattern is cut off by the validation limit; the host stays responsive", async () => {
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    try {
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  try { return await moss.hostile.costly(); } catch (error) { return (error as Error).message; }
}`,
      });
      expect(execution.returns).toBe(
        "costly: validating the result against the tool's outputSchema took longer than 500 ms (the server's schema is too costly); the result was not used",
      );
    } finally {
      clearInterval(ticker);
    }
    // The host's event loop kept turning while the regex ran elsewhere.
    expect(ticks).toBeGreaterThan(10);
  });

  test("a result that does not fit its outputSchema is an error, not data of the wrong type", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  try { return await moss.hostile.wrong_shape(); } catch (error) { return (error as Error).message; }
}`,
    });
    expect(execution.returns).toBe(
      "wrong_shape: the result does not match the tool's outputSchema: data/count must be number",
    );
  });

  test("a stdio answer past maxResponseBytes fails that call; the next call reconnects and works", async () => {
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  let flood = "";
  try { await moss.hostile.flood({ bytes: 1024 * 1024 }); flood = "accepted"; } catch (error) { flood = (error as Error).message; }
  const after = await moss.hostile.ping();
  const again = await moss.hostile.ping();
  return { flood, after, again };
}`,
    });
    expect(execution.error).toBeUndefined();
    const returns = execution.returns as { flood: string; after: unknown; again: unknown };
    expect(returns.flood).toMatch(/^flood: /);
    expect(returns.after).toEqual([{ type: "text", text: "pong" }]);
    expect(returns.again).toEqual([{ type: "text", text: "pong" }]);
  });
});

describe("a streamable-HTTP MCP answer past maxResponseBytes", () => {
  test("fails the call with a clear error instead of growing the host", async () => {
    const token = "flood-server-token-0001";
    const notes = await startNotesServer(token);
    const binding = await mcpService(
      "Notes",
      { url: notes.url, headers: { authorization: `Bearer ${token}` } },
      {
        typesFile: path.join(scratch.folder, "notes-flood.api.ts"),
        maxResponseBytes: 2_048,
        timeoutMs: 10_000,
      },
    );
    try {
      const service = binding.service as unknown as Record<string, (args?: unknown) => Promise<unknown>>;
      await service.add_note!({ text: "y".repeat(4_000) });
      await expect(service.list_notes!()).rejects.toThrow("an answer is larger than the limit of 2048 bytes");
    } finally {
      await binding.service.onDestroy();
      await notes.close();
    }
  });
});

/**
 * An HTTP API whose `/slow` never answers (it counts those requests and how many are still open) and whose `/ready`
 * answers once `expected` slow requests arrived.
 */
async function startSilentServer(expected: number): Promise<{
  url: string;
  open: () => number;
  seen: () => number;
  close(): Promise<void>;
}> {
  let open = 0;
  let seen = 0;
  const waiting: Array<() => void> = [];
  const server: Server = createServer((request: IncomingMessage, response) => {
    if (request.url?.startsWith("/ready")) {
      const answer = () => response.writeHead(200, { "content-type": "application/json" }).end("{}");
      if (seen >= expected) answer();
      else waiting.push(answer);
      return;
    }
    seen++;
    open++;
    request.socket.once("close", () => open--);
    if (seen >= expected) for (const answer of waiting.splice(0)) answer();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    open: () => open,
    seen: () => seen,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const SILENT_DOCUMENT = {
  openapi: "3.0.3",
  info: { title: "Silent", version: "1" },
  paths: {
    "/ready": {
      get: {
        operationId: "ready",
        responses: {
          "200": { description: "ok", content: { "application/json": { schema: { type: "object" } } } },
        },
      },
    },
    "/slow": {
      get: {
        operationId: "slow",
        responses: {
          "200": { description: "ok", content: { "application/json": { schema: { type: "object" } } } },
        },
      },
    },
  },
} as unknown as OpenApiDocument;

describe.each(["process", "in-process"] as const)(
  "work a run started ends with the run (%s driver)",
  (driver) => {
    test("OpenAPI: requests to an endpoint that never answers are aborted when the run ends, not at their own timeout", async () => {
      const silent = await startSilentServer(20);
      const typesFile = path.join(scratch.folder, `silent-${driver}.api.ts`);
      const runtime = await compileServices(
        scratch.folder,
        driver,
        [["silent", "Silent", typesFile]],
        (compiler) =>
          bindOpenApi(compiler, "Silent", SILENT_DOCUMENT, {
            serverUrl: silent.url,
            typesFile,
            // Only the end of the run can close these requests.
            timeoutMs: 10 * 60_000,
          }),
      );
      try {
        const execution = await runtime.execute({
          code: `async function main(moss: Moss) {
  for (let index = 0; index < 20; index++) moss.silent.slow().catch(() => {});
  await moss.silent.ready();
  return "left them running";
}`,
        });
        expect(execution.returns).toBe("left them running");
        await eventually(() => silent.seen() === 20, "the server saw the 20 requests");
        await eventually(() => silent.open() === 0, "every request was closed by the host");
      } finally {
        await runtime.close();
        await silent.close();
      }
    });

    test("MCP: a call that never answers is cancelled on the server when the run times out", async () => {
      const marker = path.join(scratch.folder, `cancelled-${driver}`);
      const typesFile = path.join(scratch.folder, `hang-${driver}.api.ts`);
      const runtime = await compileServices(
        scratch.folder,
        driver,
        [["hostile", "Hostile", typesFile]],
        (compiler) =>
          bindMcp(
            compiler,
            "Hostile",
            {
              command: process.execPath,
              args: [HOSTILE_MCP_SERVER, "tools"],
              publicEnv: { CANCEL_MARKER: marker },
            },
            { typesFile, timeoutMs: 10 * 60_000 },
          ),
      );
      try {
        const execution = await runtime.execute({
          code: `async function main(moss: Moss) {
  await moss.hostile.hang();
  return "answered";
}`,
          limits: { wallTimeMs: 1_500 },
        });
        expect(execution.error?.kind).toBe("timeout");
        await eventually(() => existsSync(marker), "the server saw the call cancelled");
      } finally {
        await runtime.close();
      }
    });
  },
);
