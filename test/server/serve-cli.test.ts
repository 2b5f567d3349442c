// `moss serve` as a user starts it (issue 18): the real binary in a child process, PGlite under --data-dir, the
// fake OpenAI server as its model. It prints its URL when ready, drains on SIGTERM, and a restarted server still
// answers the requests of runs paused before the restart and resumes the event stream where the client was.
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { descendantsNamed } from "../helpers/descendants.ts";
import { runMoss } from "../helpers/moss-cli.ts";
import {
  call,
  code,
  readEvents,
  runSettles,
  serveArguments,
  spawnServe,
  VAULT_MODULE,
} from "./server-harness.ts";

async function until(condition: () => boolean, ms = 30_000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((resolve) => setTimeout(resolve, 50)))
    if (condition()) return true;
  return condition();
}

describe("moss serve (the binary)", () => {
  const replies: FakeReply[] = [];
  let model: FakeOpenAIServer;
  let directory: string;
  let env: Record<string, string>;
  const serveArgs = () => [
    ...serveArguments(VAULT_MODULE, directory, model.baseUrl),
    "--model",
    "fake-model",
  ];

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), "moss-serve-cli-"));
    model = await startFakeOpenAIServer(replies);
    env = { MOSS_VAULT_LOG: join(directory, "vault.log"), OPENAI_API_KEY: "test", MOSS_SERVE_TOKENS: "" };
  });
  afterAll(async () => {
    await model.close();
    await rm(directory, { recursive: true, force: true });
  });

  it("prints its http://host:port when ready with --port 0, serves /health, and stops cleanly on SIGTERM", async () => {
    const serve = await spawnServe(serveArgs(), env);
    try {
      expect(serve.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const { version } = JSON.parse(await readFile("package.json", "utf8"));
      expect(await call(serve, "GET", "/health", { tenant: null })).toEqual({
        status: 200,
        body: {
          status: "ok",
          version,
          database: { status: "ok" },
          worker: { status: "running", activeRuns: 0, concurrency: 8 },
        },
      });
    } finally {
      serve.child.kill("SIGTERM");
    }
    expect(await serve.exited).toBe(0);
    expect(serve.output()).toContain("stopped");
  }, 60_000);

  it("keeps a run paused across a restart: the request is still answerable and the stream resumes from Last-Event-ID", async () => {
    replies.push(
      code('  const receipt = await moss.vault.transfer("bob", 5);\n  console.log("sent", receipt);'),
      {
        content: "Sent.",
      },
    );
    const thread = `restart-${randomUUID()}`;
    const first = await spawnServe(serveArgs(), env);
    let seen: Awaited<ReturnType<typeof readEvents>>;
    try {
      expect((await call(first, "POST", "/v1/threads", { body: { id: thread } })).status).toBe(201);
      expect(
        (await call(first, "POST", `/v1/threads/${thread}/runs`, { body: { message: "Send bob 5." } }))
          .status,
      ).toBe(202);
      seen = await readEvents(first, thread, runSettles);
      expect(seen.at(-1)!.data.status).toBe("pending");
    } finally {
      first.child.kill("SIGTERM");
    }
    expect(await first.exited).toBe(0);

    const second = await spawnServe(serveArgs(), env);
    try {
      const state = await call(second, "GET", `/v1/threads/${thread}`);
      expect(state.body).toMatchObject({ status: "pending", lastEventId: seen.at(-1)!.id });
      const request = seen.find((event) => event.event === "approval-request")!.data.request;
      expect(state.body.pending).toEqual([request]);
      expect(await readEvents(second, thread, (event) => event.id === seen.at(-1)!.id)).toEqual(seen);
      const answered = await call(second, "POST", `/v1/threads/${thread}/answers`, {
        body: { answers: { [request.id]: { approved: true } } },
        headers: { "idempotency-key": randomUUID() },
      });
      expect(answered.status).toBe(202);
      const rest = await readEvents(
        second,
        thread,
        (event) => runSettles(event) && event.data.status !== "queued",
        {
          after: seen.at(-1)!.id,
        },
      );
      expect(rest[0]!.id).toBe(seen.at(-1)!.id + 1);
      expect(rest.at(-1)!.data.status).toBe("completed");
      expect(rest.find((event) => event.event === "run-end")!.data.answer).toBe("Sent.");
      const log = (await readFile(env.MOSS_VAULT_LOG!, "utf8")).split("\n").filter(Boolean);
      expect(log).toEqual(["bob 5"]);
    } finally {
      second.child.kill("SIGTERM");
    }
    expect(await second.exited).toBe(0);
  }, 120_000);

  it("stops esbuild's compiler processes once idle (MOSS_ESBUILD_IDLE_MS) and starts them again for the next run", async () => {
    replies.push(code('  console.log("compiled", 6 * 7);'), { content: "Done." });
    const serve = await spawnServe(serveArgs(), { ...env, MOSS_ESBUILD_IDLE_MS: "2500" });
    try {
      // Loading the module compiled it (and started services); idle, none is left.
      expect(await until(() => descendantsNamed("esbuild", serve.child.pid!).length === 0)).toBe(true);
      const thread = `esbuild-idle-${randomUUID()}`;
      expect((await call(serve, "POST", "/v1/threads", { body: { id: thread } })).status).toBe(201);
      expect(
        (await call(serve, "POST", `/v1/threads/${thread}/runs`, { body: { message: "Multiply." } })).status,
      ).toBe(202);
      const events = await readEvents(serve, thread, runSettles);
      expect(events.at(-1)!.data.status).toBe("completed");
      expect(events.find((event) => event.event === "execution")!.data.execution.stdout).toContain(
        "compiled 42",
      );
      // The snippet's compile started a service again, and it stops once idle.
      expect(descendantsNamed("esbuild", serve.child.pid!).length).toBeGreaterThan(0);
      expect(await until(() => descendantsNamed("esbuild", serve.child.pid!).length === 0)).toBe(true);
    } finally {
      serve.child.kill("SIGTERM");
    }
    expect(await serve.exited).toBe(0);
  }, 90_000);

  it("refuses to start without a tenant token, and moss worker without a database URL (usage errors)", async () => {
    const noToken = await runMoss(
      ["serve", VAULT_MODULE, "--port", "0", "--data-dir", join(directory, "x")],
      {
        env: { MOSS_SERVE_TOKENS: "" },
      },
    );
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toContain("needs at least one tenant token");
    const badToken = await runMoss(["serve", VAULT_MODULE, "--token", "no-secret"], {
      env: { MOSS_SERVE_TOKENS: "" },
    });
    expect(badToken.code).toBe(4);
    expect(badToken.stderr).toContain('a token is "<tenant>:<secret>"');
    const worker = await runMoss(["worker", VAULT_MODULE], { env: { DATABASE_URL: "" } });
    expect(worker.code).toBe(2);
    expect(worker.stderr).toContain("moss worker needs --database-url");
  }, 60_000);

  it("a port another process listens on is an error naming the address and the way out, not an internal error", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      const args = serveArgs();
      args[args.indexOf("--port") + 1] = String(port);
      const result = await runMoss(args, { env });
      expect(result.code).toBe(4);
      expect(result.stderr).toContain(
        `error[invalid-argument]: cannot listen on 127.0.0.1:${port} (EADDRINUSE): another process listens there; choose another --port (0 picks a free one)`,
      );
      expect(result.stderr).not.toContain("internal error");
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  }, 60_000);
});
