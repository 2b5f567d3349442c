// RunWorker (issue 18): a worker with room for one run executes every queued run, one after another, woken by
// NOTIFY while it is full (the real agent on the ledger module, PGlite, the fake OpenAI server as the model).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { MossAgent } from "../../engine/agent/moss-agent.ts";
import { OpenAILanguageModel } from "../../engine/agent/openai-language-model.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { Run } from "../../engine/server/protocol.ts";
import { type Database, openDatabase } from "../../engine/server/store/database.ts";
import {
  DatabaseContextStore,
  DatabaseConversationStore,
} from "../../engine/server/store/database-stores.ts";
import { ServerStore } from "../../engine/server/store/index.ts";
import { RunWorker } from "../../engine/server/worker/run-worker.ts";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { freshPGliteDirectory } from "../helpers/fresh-pglite.ts";

let directory: string;
let database: Database;
let model: FakeOpenAIServer;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-worker-"));
  process.env.MOSS_LEDGER_LOG = join(directory, "ledger.log");
  database = await openDatabase({ dataDirectory: await freshPGliteDirectory(join(directory, "pglite")) });
  const replies: FakeReply[] = Array.from({ length: 3 }, () => ({ content: "Done." }));
  model = await startFakeOpenAIServer(replies);
});
afterAll(async () => {
  await database?.close();
  await model?.close();
  await closeSharedSandboxes();
  await rm(directory, { recursive: true, force: true });
  delete process.env.MOSS_LEDGER_LOG;
});

it("a worker with concurrency 1 runs all three queued runs to completion (it is woken again while full)", async () => {
  const store = new ServerStore(database);
  const conversations = new DatabaseConversationStore(database);
  const contexts = new DatabaseContextStore(database);
  const languageModel = new OpenAILanguageModel({
    baseUrl: model.baseUrl,
    apiKey: "t",
    model: "fake-model",
    maxRetries: 0,
  });
  const worker = new RunWorker({
    store,
    conversationStore: conversations,
    concurrency: 1,
    // No poll rescues a lost wake-up within the test: only NOTIFY and the end of a run wake the worker.
    pollMs: 600_000,
    createAgent: (sessionId) =>
      new MossAgent({
        model: languageModel,
        modulePath: "test/server/fixtures/ledger/context.ts",
        sessionId,
        store: contexts,
        conversationStore: conversations,
      }),
  });
  await worker.start();
  try {
    const runs: Run[] = [];
    for (const thread of ["w1", "w2", "w3"]) {
      await store.createThread("tenant", thread);
      runs.push(await store.createRun("tenant", thread, "Say done.", { maxActiveRuns: 10 }));
    }
    const statuses = async () =>
      Promise.all(runs.map(async (run) => (await store.getRun("tenant", run.threadId, run.id))!.status));
    await expect
      .poll(statuses, { timeout: 120_000, interval: 200 })
      .toEqual(["completed", "completed", "completed"]);
    for (const run of runs) {
      const stored = await store.eventsAfter("tenant", run.threadId, 0);
      expect(stored.map((event) => event.id)).toEqual(stored.map((_, index) => index + 1));
      expect(stored.filter((event) => event.type === "run-end")).toHaveLength(1);
    }
  } finally {
    await worker.stop(5_000);
  }
}, 180_000);
