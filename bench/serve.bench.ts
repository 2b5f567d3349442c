// `moss serve` figures (issue 18): 200 threads at once on one instance (PGlite), each with a live SSE client;
// latency from POST to the first event, to run-start and to the run's end; events lost; clients that drop and
// reconnect mid-run with Last-Event-ID; a sample of bad requests. Real HTTP on 127.0.0.1, the fake OpenAI server.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { startLedgerServer } from "./bench-server.ts";

const THREADS = Number(process.env.MOSS_BENCH_THREADS ?? 200);
const DROPPERS = Math.ceil(THREADS / 10);
const TOKEN = "bench-secret";

interface Received {
  id: number;
  event: string;
  status?: string;
}

/** Reads a thread's stream from `after` until `stop` says so (or `dropAfter` events, to simulate a lost client). */
async function stream(
  url: string,
  thread: string,
  after: number,
  stop: (event: Received) => boolean,
  onEvent: (event: Received) => void,
  dropAfter?: number,
): Promise<"done" | "dropped"> {
  const controller = new AbortController();
  const response = await fetch(`${url}/v1/threads/${thread}/events`, {
    headers: { authorization: `Bearer ${TOKEN}`, "last-event-id": String(after) },
    signal: controller.signal,
  });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let count = 0;
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (done) throw new Error("stream ended");
      buffer += decoder.decode(value, { stream: true });
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf("\n\n");
        const id = /^id: (\d+)$/m.exec(block);
        if (id === null) continue;
        const data = JSON.parse(/^data: (.*)$/m.exec(block)![1]!) as { status?: string };
        const event = { id: Number(id[1]), event: /^event: (.*)$/m.exec(block)![1]!, status: data.status };
        onEvent(event);
        count++;
        if (stop(event)) return "done";
        if (dropAfter !== undefined && count >= dropAfter) return "dropped";
      }
    }
  } finally {
    controller.abort();
  }
}

const ended = (event: Received) =>
  event.event === "run-status" && ["completed", "failed", "cancelled"].includes(event.status ?? "");

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export async function run(): Promise<void> {
  const directory = await mkdtemp(join(tmpdir(), "moss-serve-bench-"));
  const { server, model } = await startLedgerServer(directory, [`bench:${TOKEN}`], {
    worker: { concurrency: 8 },
    limits: { maxActiveRuns: THREADS },
  });
  const url = server.url!;
  const post = (path: string, body: unknown) =>
    fetch(`${url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  try {
    const threads = Array.from({ length: THREADS }, (_, index) => `bench-${index}`);
    for (const thread of threads) await post("/v1/threads", { id: thread });
    const received = new Map<string, Received[]>(threads.map((thread) => [thread, []]));
    const firstEvent = new Map<string, number>();
    const runStart = new Map<string, number>();
    const runEnd = new Map<string, number>();
    const posted = new Map<string, number>();
    let reconnects = 0;
    const clients = threads.map(async (thread, index) => {
      const list = received.get(thread)!;
      const onEvent = (event: Received) => {
        const now = performance.now();
        list.push(event);
        if (!firstEvent.has(thread)) firstEvent.set(thread, now);
        if (event.event === "run-start" && !runStart.has(thread)) runStart.set(thread, now);
        if (ended(event)) runEnd.set(thread, now);
      };
      // One client in ten drops after its second event and reconnects with the last id it saw.
      let outcome = await stream(url, thread, 0, ended, onEvent, index < DROPPERS ? 2 : undefined);
      while (outcome === "dropped") {
        reconnects++;
        outcome = await stream(url, thread, list.at(-1)!.id, ended, onEvent);
      }
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    // How long the event loop serving HTTP (and the worker, and these clients) was blocked while the runs worked.
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    const started = performance.now();
    await Promise.all(
      threads.map(async (thread) => {
        posted.set(thread, performance.now());
        const response = await post(`/v1/threads/${thread}/runs`, { message: "Say done." });
        if (response.status !== 202)
          throw new Error(`run of ${thread}: ${response.status} ${await response.text()}`);
      }),
    );
    await Promise.all(clients);
    const wall = performance.now() - started;
    loopDelay.disable();
    // Events lost: what each live client got against what the database holds, id for id.
    let lost = 0;
    let duplicated = 0;
    for (const thread of threads) {
      const stored = await server.store.eventsAfter("bench", thread, 0, 10_000);
      const got = received.get(thread)!.map((event) => event.id);
      lost += stored.filter((event) => !got.includes(event.id)).length;
      duplicated += got.length - new Set(got).size;
    }
    const since = (times: Map<string, number>) =>
      threads.map((thread) => times.get(thread)! - posted.get(thread)!);
    const row = (name: string, values: number[]) =>
      console.log(
        `| ${name.padEnd(34)} | ${percentile(values, 50).toFixed(0).padStart(7)} | ${percentile(values, 95).toFixed(0).padStart(7)} | ${Math.max(
          ...values,
        )
          .toFixed(0)
          .padStart(7)} |`,
      );
    console.log(
      `\n## moss serve: ${THREADS} concurrent threads on one instance (PGlite, worker concurrency 8)`,
    );
    console.log(`| from POST /runs to                 | p50 ms  | p95 ms  | max ms  |\n|---|---:|---:|---:|`);
    row("first event (run-status queued)", since(firstEvent));
    row("run-start (a worker took it)", since(runStart));
    row("run ended (run-status completed)", since(runEnd));
    console.log(
      `all ${THREADS} runs done in ${(wall / 1000).toFixed(1)} s; events lost: ${lost}; duplicated: ${duplicated}; ` +
        `${DROPPERS} clients dropped mid-run and reconnected ${reconnects} times with Last-Event-ID, missing ${lost} events`,
    );
    console.log(
      `event-loop delay while the runs worked (the loop serving HTTP): p50 ${(loopDelay.percentile(50) / 1e6).toFixed(0)} ms, ` +
        `p99 ${(loopDelay.percentile(99) / 1e6).toFixed(0)} ms, max ${(loopDelay.max / 1e6).toFixed(0)} ms`,
    );
    // Bad input: each must be a clear 4xx.
    const bad: Array<[string, Promise<Response>]> = [
      [
        "malformed JSON",
        fetch(`${url}/v1/threads/bench-0/runs`, {
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}` },
          body: '{"message":',
        }),
      ],
      ["huge body (2 MB)", post("/v1/threads/bench-0/runs", { message: "x".repeat(2_000_000) })],
      ["unknown thread", post("/v1/threads/nope/runs", { message: "hi" })],
      ["no token", fetch(`${url}/v1/threads`)],
      [
        "stale Last-Event-ID",
        fetch(`${url}/v1/threads/bench-0/events`, {
          headers: { authorization: `Bearer ${TOKEN}`, "last-event-id": "99999" },
        }),
      ],
    ];
    for (const [name, request] of bad) {
      const response = await request;
      const body = (await response.json()) as { error: { code: string; message: string } };
      console.log(
        `bad input · ${name}: ${response.status} ${body.error.code}: ${body.error.message.slice(0, 100)}`,
      );
    }
  } finally {
    await server.close(5_000);
    await model.close();
    await rm(directory, { recursive: true, force: true });
  }
}
