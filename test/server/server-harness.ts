// Starts a real `moss serve` core (HTTP on 127.0.0.1, PGlite or PostgreSQL, a worker) with the fake OpenAI
// server as its model, and reads its event stream the way a browser's EventSource would.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { afterAll, beforeAll } from "vitest";
import { OpenAILanguageModel } from "../../engine/agent/openai-language-model.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { type MossServer, type MossServerOptions, startMossServer } from "../../engine/server/moss-server.ts";
import type { DatabaseLocation } from "../../engine/server/store/database.ts";
import { TenantTokens } from "../../engine/server/tenant-tokens.ts";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { freshPGliteDirectory } from "../helpers/fresh-pglite.ts";

export const VAULT_MODULE = "test/agent/fixtures/vault/context.ts";
export const TOKENS = { alice: "alice-secret", bob: "bob-secret" } as const;

/** A model reply that runs `body` as the moss tool's `main(moss)`, after `prose`. */
export const code = (body: string, prose = ""): FakeReply => ({
  content: prose,
  toolCalls: [
    { name: "moss", arguments: JSON.stringify({ code: `async function main(moss: Moss) {\n${body}\n}` }) },
  ],
});

/** The vault's `@approval` transfer, as model code. */
export const TRANSFER =
  '  const receipt = await moss.vault.transfer("bob", 5);\n  console.log("sent", receipt);';

/** What {@link useVaultServer} gives a test file (its fields are set once the server started). */
export interface VaultServer {
  /** The fake model's replies, in order: push before a run. */
  readonly replies: FakeReply[];
  model: FakeOpenAIServer;
  server: MossServer;
  /** A temporary directory the fixture removes after the file's tests. */
  directory: string;
  /** Each transfer that really ran, one line each (the vault's log file). */
  transfers(): Promise<string[]>;
}

/**
 * The vault module's server (PGlite under a temporary directory, the fake OpenAI server as its model), started
 * before the file's tests and stopped after them.
 */
export function useVaultServer(prefix: string, options: Partial<MossServerOptions> = {}): VaultServer {
  const fixture = {
    replies: [] as FakeReply[],
    transfers: async () =>
      (await readFile(process.env.MOSS_VAULT_LOG!, "utf8").catch(() => "")).split("\n").filter(Boolean),
  } as VaultServer;
  beforeAll(async () => {
    fixture.directory = await mkdtemp(join(tmpdir(), prefix));
    process.env.MOSS_VAULT_LOG = join(fixture.directory, "vault.log");
    fixture.model = await startFakeOpenAIServer(fixture.replies);
    fixture.server = await startTestServer(
      { dataDirectory: await freshPGliteDirectory(join(fixture.directory, "data")) },
      fixture.model.baseUrl,
      options,
    );
  }, 60_000);
  afterAll(async () => {
    await fixture.server?.close(1_000);
    await fixture.model?.close();
    await closeSharedSandboxes();
    if (fixture.directory !== undefined) await rm(fixture.directory, { recursive: true, force: true });
    delete process.env.MOSS_VAULT_LOG;
  });
  return fixture;
}

/** A server with tenants alice and bob, its model at `modelUrl`. */
export async function startTestServer(
  database: DatabaseLocation,
  modelUrl: string,
  options: Partial<MossServerOptions> = {},
): Promise<MossServer> {
  return startMossServer({
    modulePath: VAULT_MODULE,
    model: new OpenAILanguageModel({ baseUrl: modelUrl, apiKey: "test", model: "fake-model", maxRetries: 0 }),
    database,
    http: {
      port: 0,
      tokens: TenantTokens.parse(
        Object.entries(TOKENS).map(([tenant, secret]) => `${tenant}:${secret}`),
        "test",
      ),
    },
    worker: { leaseMs: 15_000, pollMs: 500 },
    agent: { maxSteps: 5 },
    version: "test",
    // These suites test what a started server does: its start proves the module on its own thread, sooner than a
    // process of its own started from the sources (module-proof.test.ts and the CLI's tests prove it in a process).
    moduleProof: "thread",
    ...options,
  });
}

/** A JSON request as a tenant; resolves the status and the parsed body. */
export async function call(
  server: { url: string | undefined },
  method: string,
  path: string,
  options: {
    tenant?: keyof typeof TOKENS | null;
    body?: unknown;
    raw?: string;
    headers?: Record<string, string>;
  } = {},
): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { ...options.headers };
  const tenant = options.tenant === undefined ? "alice" : options.tenant;
  if (tenant !== null) headers.authorization = `Bearer ${TOKENS[tenant]}`;
  let body: string | undefined = options.raw;
  if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body }),
  });
  const text = await response.text();
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) };
}

/** One SSE event as a client receives it. */
export interface ReceivedEvent {
  id: number;
  event: string;
  data: any;
}

/**
 * Reads the thread's event stream until `until` holds for an event (or `count` events came), then disconnects.
 * `after` is sent as Last-Event-ID.
 */
export async function readEvents(
  server: { url: string | undefined },
  threadId: string,
  until: (event: ReceivedEvent) => boolean,
  options: { after?: number; tenant?: keyof typeof TOKENS; query?: string } = {},
): Promise<ReceivedEvent[]> {
  const controller = new AbortController();
  const headers: Record<string, string> = {
    authorization: `Bearer ${TOKENS[options.tenant ?? "alice"]}`,
    accept: "text/event-stream",
  };
  if (options.after !== undefined) headers["last-event-id"] = String(options.after);
  const response = await fetch(`${server.url}/v1/threads/${threadId}/events${options.query ?? ""}`, {
    headers,
    signal: controller.signal,
  });
  if (response.status !== 200) throw new Error(`event stream: ${response.status} ${await response.text()}`);
  const received: ReceivedEvent[] = [];
  try {
    const ended = !(await readSse(response, (message) => {
      const event = {
        id: Number(message.id),
        event: message.event ?? "message",
        data: JSON.parse(message.data),
      };
      received.push(event);
      return until(event);
    }));
    if (ended) throw new Error(`the stream ended after ${received.length} events`);
    return received;
  } finally {
    controller.abort();
  }
}

/**
 * Reads a `text/event-stream` response with eventsource-parser (the parser moss-ts/client uses), calling `onMessage`
 * for each event until it returns true (resolves true) or the stream ends (resolves false). Comments (heartbeats)
 * are skipped.
 */
export async function readSse(
  response: Response,
  onMessage: (message: EventSourceMessage) => boolean | undefined,
): Promise<boolean> {
  let stop = false;
  const parser = createParser({
    onEvent(message) {
      if (!stop && onMessage(message) === true) stop = true;
    },
  });
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  try {
    while (!stop) {
      const { done, value } = await reader.read();
      if (done) return false;
      parser.feed(value);
    }
    return true;
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** The run-status event that ends a run (completed, failed, cancelled) or parks it (pending). */
export function runSettles(event: ReceivedEvent): boolean {
  return (
    event.event === "run-status" &&
    ["completed", "failed", "cancelled", "pending"].includes(event.data.status)
  );
}

/** `moss serve <module>` on a free port, PGlite under `<directory>/data`, tenant alice, the model at `modelUrl`. */
export function serveArguments(modulePath: string, directory: string, modelUrl: string): string[] {
  return [
    "serve",
    modulePath,
    "--port",
    "0",
    "--data-dir",
    join(directory, "data"),
    "--token",
    `alice:${TOKENS.alice}`,
    "--base-url",
    modelUrl,
  ];
}

/** A `moss serve` child process and what it printed. */
export interface ServeProcess {
  url: string;
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Starts the real `moss` binary with `args` as a user does (plain `node`), and resolves once it printed its `http://host:port` line. */
export async function spawnServe(args: string[], env: Record<string, string> = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, ["bin/moss.js", ...args], {
    env: { ...process.env, VITEST: "", NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /http:\/\/[^\s]+:\d+/.exec(output);
      if (match !== null) resolve(match[0]);
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    exited.then((code) => reject(new Error(`moss serve exited (${code}) before it was ready:\n${output}`)));
  });
  return { url, child, output: () => output, exited };
}
