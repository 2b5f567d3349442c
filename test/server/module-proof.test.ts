// A server's start proves its module loads in a process of its own (engine/server/module-proof.ts): the idle server
// holds none of the engine that reads modules, and loads the module itself with the first request that needs it. A
// module that cannot load still fails the start with its located error; a server given a container proves it on
// its own thread.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Container } from "../../container/index.ts";
import { OpenAILanguageModel } from "../../engine/agent/index.ts";
import { MossError } from "../../engine/errors.ts";
import { isPlainData } from "../../engine/server/module-proof.ts";
import { type MossServerOptions, startMossServer } from "../../engine/server/moss-server.ts";
import { TenantTokens } from "../../engine/server/tenant-tokens.ts";
import { freshPGliteDirectory } from "../helpers/fresh-pglite.ts";
import { call } from "./server-harness.ts";

const MODULE = "test/server/fixtures/proof/context.ts";
let folder: string;
let log: string;

beforeEach(() => {
  folder = mkdtempSync(join(tmpdir(), "moss-module-proof-"));
  log = join(folder, "loads.log");
  process.env.MOSS_PROOF_LOG = log;
});
afterEach(() => {
  delete process.env.MOSS_PROOF_LOG;
  delete process.env.MOSS_PROOF_FAIL;
  rmSync(folder, { recursive: true, force: true });
});

const loads = (): number[] =>
  existsSync(log) ? readFileSync(log, "utf8").trim().split("\n").filter(Boolean).map(Number) : [];

async function start(options: Partial<MossServerOptions> = {}) {
  return startMossServer({
    modulePath: options.modulePath ?? MODULE,
    model: new OpenAILanguageModel({
      baseUrl: "http://127.0.0.1:9/v1",
      apiKey: "test",
      model: "m",
      maxRetries: 0,
    }),
    database: { dataDirectory: await freshPGliteDirectory(join(folder, "db")) },
    http: { port: 0, tokens: TenantTokens.parse(["alice:alice-secret"], "test") },
    worker: false,
    checkModel: false,
    version: "test",
    ...options,
  });
}

describe("the start's module proof", () => {
  it("loads the module in a process of its own at start, and in the server with the first request that needs it", async () => {
    const server = await start();
    try {
      const [proof, ...rest] = loads();
      expect(rest).toEqual([]);
      expect(proof).toBeGreaterThan(0);
      expect(proof).not.toBe(process.pid);
      const thread = (await call(server, "POST", "/v1/threads", { tenant: "alice", body: {} })).body.thread
        .id;
      const prompt = await call(server, "GET", `/v1/threads/${thread}/prompt`, { tenant: "alice" });
      expect(prompt.status).toBe(200);
      expect(JSON.stringify(prompt.body)).toContain("count");
      expect(loads()).toEqual([proof, process.pid]);
    } finally {
      await server.close(1_000);
    }
  }, 120_000);

  it("fails the start with the module's own error when the module cannot load", async () => {
    process.env.MOSS_PROOF_FAIL = "1";
    const failure = await start().then(
      async (server) => {
        await server.close(1_000);
        return undefined;
      },
      (error: unknown) => error,
    );
    expect(MossError.is(failure)).toBe(true);
    expect(String((failure as Error).message)).toContain(
      "the proof module refuses to load (MOSS_PROOF_FAIL)",
    );
    expect(String((failure as Error).message)).toContain("context.ts");
  }, 120_000);

  it("names the file, line and cause of a syntax error in the module", async () => {
    const broken = join(process.cwd(), "test/server/fixtures/proof/broken.context.ts");
    writeFileSync(
      broken,
      'import { Moss as Parent } from "moss-ts";\nexport class Moss extends Parent {\n  count = ;\n}\n',
    );
    try {
      const failure = await start({ modulePath: broken }).then(
        async (server) => {
          await server.close(1_000);
          return undefined;
        },
        (error: unknown) => error,
      );
      expect(MossError.is(failure, "module-syntax")).toBe(true);
      expect((failure as Error).message).toMatch(/broken\.context\.ts:3:/);
    } finally {
      rmSync(broken, { force: true });
    }
  }, 120_000);

  it.each([
    [
      "it is given objects a process cannot be handed (a container)",
      { agent: { container: new Container() } },
    ],
    ['moduleProof is "thread"', { moduleProof: "thread" as const }],
  ])(
    "proves the module on the server's own thread when %s",
    async (_when, options) => {
      const server = await start(options);
      try {
        expect(loads()).toEqual([process.pid]);
      } finally {
        await server.close(1_000);
      }
    },
    120_000,
  );

  it("hands another process plain data only", () => {
    expect(isPlainData({ typeCheck: "strict", limits: { timeoutMs: 5 }, list: [1, "a", null] })).toBe(true);
    expect(isPlainData({ redact: (text: string) => text })).toBe(false);
    expect(isPlainData({ when: new Date() })).toBe(false);
    expect(isPlainData({ n: Number.NaN })).toBe(false);
  });
});
