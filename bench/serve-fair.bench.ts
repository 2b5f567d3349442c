// `moss serve` fairness and bounds (issue 23 §3): /health latency while a 1 MB one-letter message is counted (ratio
// to idle), the server's memory with 40 readers that never read a thread of large events, and how long a second
// tenant's single run waits behind a first tenant's 12. Real HTTP on 127.0.0.1, PGlite, the fake OpenAI server.
import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { streamHeldBytes } from "../engine/server/http/follow-thread-events.ts";
import type { MossServer } from "../engine/server/moss-server.ts";
import { startLedgerServer } from "./bench-server.ts";
import { summarize } from "./stats.ts";

const TOKENS = { first: "first-secret", second: "second-secret" } as const;
const READERS = Number(process.env.MOSS_BENCH_SLOW_READERS ?? 40);
// More than a loopback socket takes in (Linux may buffer tens of MiB per connection), in one page of the old 500.
const LARGE_EVENTS = Number(process.env.MOSS_BENCH_LARGE_EVENTS ?? 480);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const median = (values: number[]) => summarize(values).median;

async function send(url: string, tenant: keyof typeof TOKENS, method: string, path: string, body?: unknown) {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKENS[tenant]}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return (await response.json()) as any;
}

async function healthLatency(url: string): Promise<number> {
  const started = performance.now();
  await (await fetch(`${url}/health`)).text();
  return performance.now() - started;
}

async function runEnded(server: MossServer, tenant: string, threadId: string, runId: string): Promise<void> {
  for (;;) {
    const run = await server.store.getRun(tenant, threadId, runId);
    if (run !== undefined && ["completed", "failed", "cancelled", "pending"].includes(run.status)) return;
    await sleep(20);
  }
}

export async function run(): Promise<void> {
  const directory = await mkdtemp(join(tmpdir(), "moss-fair-bench-"));
  const { server, model } = await startLedgerServer(
    directory,
    Object.entries(TOKENS).map(([tenant, secret]) => `${tenant}:${secret}`),
    {
      worker: { concurrency: 1 },
      limits: { maxActiveRuns: 100 },
    },
  );
  const url = server.url!;
  try {
    console.log("\n## moss serve: one tenant cannot hurt another (PGlite, worker concurrency 1)");
    console.log("| figure | value |\n|---|---:|");

    // 1. /health while a 1 MB one-letter message is counted.
    for (let index = 0; index < 5; index++) await healthLatency(url);
    const idle: number[] = [];
    for (let index = 0; index < 30; index++) idle.push(await healthLatency(url));
    const thread = (await send(url, "first", "POST", "/v1/threads", {})).thread.id;
    const posted = await send(url, "first", "POST", `/v1/threads/${thread}/runs`, {
      message: "a".repeat(1_000_000),
    });
    const busy: number[] = [];
    let done = false;
    const ended = runEnded(server, "first", thread, posted.run.id).then(() => {
      done = true;
    });
    while (!done) busy.push(await healthLatency(url));
    await ended;
    console.log(`| /health idle, median ms | ${median(idle).toFixed(1)} |`);
    console.log(
      `| /health while a 1 MB one-letter message is counted: median / max ms (${busy.length} requests) | ${median(busy).toFixed(1)} / ${Math.max(...busy).toFixed(1)} |`,
    );
    console.log(`| ratio of the medians (busy / idle) | ${(median(busy) / median(idle)).toFixed(1)} |`);

    // 2. A second tenant's single run behind a first tenant's 12 (one slot).
    const queuedAt = performance.now();
    const firsts: Array<{ thread: string; run: string }> = [];
    for (let index = 0; index < 12; index++) {
      const queued = (await send(url, "first", "POST", "/v1/threads", {})).thread.id;
      const started = await send(url, "first", "POST", `/v1/threads/${queued}/runs`, {
        message: "Say done.",
      });
      firsts.push({ thread: queued, run: started.run.id });
    }
    const secondThread = (await send(url, "second", "POST", "/v1/threads", {})).thread.id;
    const secondPosted = performance.now();
    const second = await send(url, "second", "POST", `/v1/threads/${secondThread}/runs`, {
      message: "Say done.",
    });
    await runEnded(server, "second", secondThread, second.run.id);
    const secondServed = performance.now() - secondPosted;
    let firstsBefore = 0;
    for (const { thread: queued, run: runId } of firsts) {
      const state = await server.store.getRun("first", queued, runId);
      if (state?.status === "completed") firstsBefore += 1;
    }
    for (const { thread: queued, run: runId } of firsts) await runEnded(server, "first", queued, runId);
    const allServed = performance.now() - queuedAt;
    console.log(
      `| second tenant's run behind the first's 12: POST to its end, ms (runs of the first done by then) | ${secondServed.toFixed(0)} (${firstsBefore} of 12) |`,
    );
    console.log(`| all 13 runs, ms | ${allServed.toFixed(0)} |`);

    // 3. Readers that never read a thread of large events.
    const large = (await send(url, "first", "POST", "/v1/threads", {})).thread.id;
    const size = 100 * 1024;
    for (let start = 0; start < LARGE_EVENTS; start += 20) {
      await server.store.appendEvents(
        "first",
        large,
        null,
        Array.from({ length: 20 }, (_, index) => ({
          type: "notice",
          message: `${start + index} ${"e".repeat(size)}`,
        })),
      );
    }
    global.gc?.();
    const before = process.memoryUsage();
    const sockets = Array.from({ length: READERS }, () => {
      const socket = connect(Number(new URL(url).port), "127.0.0.1");
      socket.once("data", () => socket.pause());
      socket.write(
        `GET /v1/threads/${large}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKENS.first}\r\n\r\n`,
      );
      return socket;
    });
    // Let every stream fill its socket and wait: nothing written for 3 s.
    let last = -1;
    for (let stable = 0; stable < 15; ) {
      await sleep(200);
      const held = streamHeldBytes();
      stable = held.streams === READERS && held.written === last ? stable + 1 : 0;
      last = held.written;
    }
    global.gc?.();
    const after = process.memoryUsage();
    const held = streamHeldBytes();
    const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
    console.log(
      `| ${READERS} readers that never read a thread of ${LARGE_EVENTS} events of 100 KB: events held by the streams, MiB (largest per stream, KiB) | ${mib(held.bytes)} (${(held.largest / 1024).toFixed(0)}) |`,
    );
    console.log(
      `| the same: server process growth, heap + external MiB / RSS MiB | ${mib(after.heapUsed + after.external - before.heapUsed - before.external)} / ${mib(after.rss - before.rss)} |`,
    );
    for (const socket of sockets) socket.destroy();
  } finally {
    await server.close(1_000);
    await model.close();
    await rm(directory, { recursive: true, force: true });
    delete process.env.MOSS_LEDGER_LOG;
  }
}
