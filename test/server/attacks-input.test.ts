// Attacks on `moss serve`'s input (issue 23 §3): NUL bytes and lone surrogates in a message, metadata, a path id, a
// query parameter, an answer or an AG-UI message are a 400 naming the field, and nothing is stored; two tenants
// given one secret stop the server at start, naming both. Real HTTP, on PGlite and PostgreSQL (PostgreSQL's text
// cannot hold a NUL byte at all).
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { MossServer } from "../../engine/server/moss-server.ts";
import type { DatabaseLocation } from "../../engine/server/store/database.ts";
import { TenantTokens } from "../../engine/server/tenant-tokens.ts";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { pgliteSuiteDatabase } from "../helpers/fresh-pglite.ts";
import { runMoss } from "../helpers/moss-cli.ts";
import { createPostgresDatabase, type PostgresDatabase } from "../helpers/postgres-database.ts";
import { POSTGRES_TESTS } from "../helpers/postgres-server.ts";
import {
  call,
  code,
  readEvents,
  runSettles,
  startTestServer,
  TOKENS,
  TRANSFER,
  VAULT_MODULE,
} from "./server-harness.ts";

/** A raw JSON body with `\u0000` or a lone `\ud800` escape where `HOLE` stands. */
const NUL = "\\u0000";
const SURROGATE = "\\ud800";

function suite(name: string, locate: () => Promise<{ location: DatabaseLocation; end(): Promise<void> }>) {
  describe(`input the server cannot store is refused at the edge, on ${name}`, () => {
    const replies: FakeReply[] = [];
    let model: FakeOpenAIServer;
    let server: MossServer;
    let place: { location: DatabaseLocation; end(): Promise<void> };
    let directory: string;

    beforeAll(async () => {
      directory = await mkdtemp(join(tmpdir(), "moss-attacks-input-"));
      process.env.MOSS_VAULT_LOG = join(directory, "vault.log");
      place = await locate();
      model = await startFakeOpenAIServer(replies);
      server = await startTestServer(place.location, model.baseUrl);
    }, 60_000);
    afterAll(async () => {
      await server?.close(1_000);
      await model?.close();
      await place?.end();
      await closeSharedSandboxes();
      await rm(directory, { recursive: true, force: true });
      delete process.env.MOSS_VAULT_LOG;
    });

    const newThread = async () => {
      const id = `input-${randomUUID()}`;
      expect((await call(server, "POST", "/v1/threads", { body: { id } })).status).toBe(201);
      return id;
    };
    /** A 400 `text-invalid` whose message names `field`. */
    const refused = (answer: { status: number; body: any }, field: string) => {
      expect(answer.status).toBe(400);
      expect(answer.body.error.code).toBe("text-invalid");
      expect(answer.body.error.message).toContain(field);
    };

    for (const [what, hole] of [
      ["a NUL byte", NUL],
      ["a lone surrogate", SURROGATE],
    ] as const) {
      it(`${what} in a message is 400 naming "message"; no run is stored`, async () => {
        const thread = await newThread();
        const answer = await call(server, "POST", `/v1/threads/${thread}/runs`, {
          raw: `{"message": "Send bob 5${hole} euros."}`,
        });
        refused(answer, "message");
        const state = await call(server, "GET", `/v1/threads/${thread}`);
        expect(state.body).toMatchObject({ status: "idle", lastEventId: 0 });
      });

      it(`${what} in metadata (a value or a key) is 400 naming the field; no thread is stored`, async () => {
        for (const [raw, field] of [
          [`{"title": "hi${hole}"}`, "metadata.title"],
          [`{"ti${hole}tle": "hi"}`, "the key metadata["],
          [`{"tags": ["ok", "b${hole}"]}`, "metadata.tags[1]"],
        ] as const) {
          const id = `input-${randomUUID()}`;
          const answer = await call(server, "POST", "/v1/threads", {
            raw: `{"id": "${id}", "metadata": ${raw}}`,
          });
          refused(answer, field);
          expect((await call(server, "GET", `/v1/threads/${id}`)).status).toBe(404);
        }
      });

      it(`${what} in an AG-UI message is 400 naming it; nothing is stored`, async () => {
        const threadId = `input-${randomUUID()}`;
        const response = await fetch(`${server.url}/v1/agui`, {
          method: "POST",
          headers: { authorization: `Bearer ${TOKENS.alice}`, "content-type": "application/json" },
          body: `{"threadId": "${threadId}", "runId": "r", "messages": [{"id": "m1", "role": "user", "content": "Send bob 5${hole}"}]}`,
        });
        refused({ status: response.status, body: await response.json() }, "messages[0].content");
        expect((await call(server, "GET", `/v1/threads/${threadId}`)).status).toBe(404);
      });
    }

    it("a NUL byte or a lone surrogate in a path id is 400 naming it", async () => {
      const thread = await newThread();
      for (const [path, field] of [
        [`/v1/threads/${thread}/runs/run%00x`, "runId"],
        [`/v1/threads/${thread}/runs/run%00x/cancel`, "runId"],
        [`/v1/threads/${thread}/runs/run%ED%A0%80`, "runId"],
      ] as const) {
        const method = path.endsWith("cancel") ? "POST" : "GET";
        refused(await call(server, method, path), field);
      }
    });

    it("a NUL byte or a lone surrogate in a query parameter is 400 naming it", async () => {
      refused(await call(server, "GET", "/v1/threads?before=x%00y"), "?before");
      refused(await call(server, "GET", "/v1/threads?before=x%ED%A0%80"), "before");
    });

    it("a NUL byte in an answer's reason is 400 naming it; the run still waits and nothing is applied", async () => {
      const thread = await newThread();
      replies.push(code(TRANSFER));
      const created = await call(server, "POST", `/v1/threads/${thread}/runs`, {
        body: { message: "Send bob 5." },
      });
      await readEvents(server, thread, runSettles);
      const state = await call(server, "GET", `/v1/threads/${thread}`);
      const id = state.body.pending[0].id as string;
      const answer = await call(server, "POST", `/v1/threads/${thread}/answers`, {
        raw: `{"answers": {"${id}": {"approved": false, "reason": "no${NUL}"}}}`,
      });
      refused(answer, `answers["${id}"].reason`);
      const after = await call(server, "GET", `/v1/threads/${thread}`);
      expect(after.body).toMatchObject({ status: "pending", lastEventId: state.body.lastEventId });
      expect(after.body.pending.map((request: { id: string }) => request.id)).toEqual([id]);
      await call(server, "POST", `/v1/threads/${thread}/runs/${created.body.run.id}/cancel`);
    });
  });
}

suite("PGlite", () => pgliteSuiteDatabase("moss-attacks-input-pglite-"));

describe.runIf(POSTGRES_TESTS)("PostgreSQL", () => {
  suite("PostgreSQL", async () => {
    const postgres: PostgresDatabase = await createPostgresDatabase();
    return { location: { url: postgres.url }, end: () => postgres.drop() };
  });
});

describe("two tenants with one secret", () => {
  let directory: string;
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), "moss-attacks-tokens-"));
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it("are refused when the tokens are read, naming both tenants", () => {
    expect(() => TenantTokens.parse(["carol:S", "dave:S"], "--token")).toThrow(
      /--token: tenants "carol" and "dave" have the same secret/,
    );
    // One tenant's own secret twice, or two secrets of one tenant (a rotation), is fine.
    expect(
      TenantTokens.parse(["carol:S", "carol:S", "carol:T", "dave:U"], "--token").tenantOf("Bearer S"),
    ).toBe("carol");
  });

  it("stop moss serve at start, from --token flags, MOSS_SERVE_TOKENS or the config file's tokens", async () => {
    const data = ["--port", "0", "--data-dir", join(directory, "data")];
    const flags = await runMoss(["serve", VAULT_MODULE, ...data, "--token", "carol:S", "--token", "dave:S"], {
      env: { MOSS_SERVE_TOKENS: "" },
    });
    const environment = await runMoss(["serve", VAULT_MODULE, ...data], {
      env: { MOSS_SERVE_TOKENS: "carol:S,dave:S" },
    });
    const config = join(directory, "moss.config.yaml");
    await writeFile(config, 'tokens: ["carol:S"]\n');
    const mixed = await runMoss(["serve", VAULT_MODULE, ...data, "--config", config, "--token", "dave:S"], {
      env: { MOSS_SERVE_TOKENS: "" },
    });
    for (const result of [flags, environment, mixed]) {
      expect(result.code).not.toBe(0);
      expect(result.stderr).toMatch(/tenants "(carol|dave)" and "(carol|dave)" have the same secret/);
      expect(result.stderr).toContain('"carol"');
      expect(result.stderr).toContain('"dave"');
    }
  }, 60_000);
});
