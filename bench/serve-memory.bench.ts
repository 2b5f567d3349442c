// `moss serve`'s memory (issue 27): the whole process tree of the real CLI on PGlite with one small module, idle
// before its first request — on a new data directory (the database is made at start) and again on the same one —
// against the goal of 256 MiB; then where the server process's memory goes, stage by stage, measured in a fresh
// process (Node and the CLI, the embedded database; then what the first run or prompt loads: the engine, the module's
// analysis and first runtime, the first type-check). The idle server holds only the first two: its start proves the
// module in a process of its own (engine/server/module-proof.ts).
import { spawn } from "node:child_process";
import { copyFileSync, mkdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type FakeReply, startFakeOpenAIServer } from "../test/agent/fake-openai-server.ts";
import { buildPublishedCli, endlessReplies, treeProcesses } from "./bench-fixtures.ts";
import { RESULT_MARKER, runChild } from "./child-process.ts";

const MIB = 1024 * 1024;
const GOAL_MIB = 256;
const THREAD_GOAL_MIB = 4;
const THREADS = 20;
const IDLE_SETTLE_MS = 7_000;
/**
 * When an idle server is measured again: V8 gives back what the start left (its memory reducer runs some seconds
 * after activity stops; ~45 MiB of a `moss serve` measured here between 15 and 30 s after it was ready).
 */
const STEADY_MS = 40_000;
const TOKEN = "bench-secret-0123456789";
/** The CLI as published (dist/ and bin/, built into this folder), as a user's `moss serve` runs. */
const BUILD = fileURLToPath(new URL("./.tmp/serve-build/", import.meta.url));
const TODO = fileURLToPath(new URL("../examples/todo/", import.meta.url));
const TODO_FILES = ["context.ts", "context.host.ts", "todo-list.ts", "json-file-todo-list.ts"];

/** Builds the published CLI and copies the todo example beside it (its `moss-ts` import resolves to the build). */
function prepare(): { cli: string; module: string } {
  const cli = buildPublishedCli(BUILD);
  const folder = join(BUILD, "examples", "todo");
  mkdirSync(folder, { recursive: true });
  for (const file of TODO_FILES) copyFileSync(join(TODO, file), join(folder, file));
  return { cli, module: join(folder, "context.ts") };
}

/** What a process is, for the breakdown. */
function roleOf(command: string): string {
  if (command.includes("esbuild") && command.includes("--service")) return "esbuild service";
  if (command.includes(" serve ")) return "server process (HTTP, worker, PGlite thread, type-check workers)";
  if (command.includes("sandbox")) return "sandbox process";
  return command.split(" ").slice(0, 2).join(" ") || "other";
}

/**
 * Starts the real CLI, waits for its ready line and `settleMs` more, and measures the whole tree; then, with
 * `threads`, runs one task in a first thread and in `count - 1` more (one checked execute each), measuring after each.
 */
async function idleTree(
  built: { cli: string; module: string },
  dataDirectory: string,
  settleMs: number,
  threads?: { modelUrl: string; count: number },
) {
  const child = spawn(
    process.execPath,
    [
      built.cli,
      "serve",
      built.module,
      "--port",
      "0",
      "--token",
      `bench:${TOKEN}`,
      "--data-dir",
      dataDirectory,
      ...(threads === undefined ? [] : ["--base-url", threads.modelUrl]),
    ],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, OPENAI_API_KEY: "bench" } },
  );
  let output = "";
  const started = performance.now();
  const treeBytes = () => treeProcesses(child.pid!).reduce((sum, process) => sum + process.rss, 0);
  const settle = () => new Promise((resolve) => setTimeout(resolve, settleMs));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`moss serve did not start:\n${output}`)), 180_000);
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes("moss serve ·")) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout.on("data", onData);
      child.stderr.on("data", onData);
      child.once("exit", (code) => reject(new Error(`moss serve exited (${code}):\n${output}`)));
    });
    const readyAt = performance.now();
    const readyMs = readyAt - started;
    await settle();
    const early = treeBytes();
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, readyAt + STEADY_MS - performance.now())));
    const idle = treeBytes();
    const idleRoles = rolesOf(treeProcesses(child.pid!));
    let perThread: { first: number; after: number } | undefined;
    if (threads !== undefined) {
      const url = /http:\/\/[\d.]+:\d+/.exec(output)![0];
      await runTasks(url, 1);
      await settle();
      const first = treeBytes();
      await runTasks(url, threads.count - 1);
      await settle();
      perThread = { first, after: treeBytes() };
    }
    return { readyMs, early, idle, idleRoles, roles: rolesOf(treeProcesses(child.pid!)), perThread };
  } finally {
    child.kill("SIGTERM");
    await new Promise((resolve) => child.once("exit", resolve));
  }
}

/** The processes of a tree by role: how many, and their resident size. */
function rolesOf(processes: ReturnType<typeof treeProcesses>): Map<string, { rss: number; count: number }> {
  const roles = new Map<string, { rss: number; count: number }>();
  for (const process of processes) {
    const role = roleOf(process.command);
    const entry = roles.get(role) ?? { rss: 0, count: 0 };
    roles.set(role, { rss: entry.rss + process.rss, count: entry.count + 1 });
  }
  return roles;
}

/** Runs one task in each of `count` new threads (each a checked execute, then an answer) and waits for their ends. */
async function runTasks(url: string, count: number): Promise<void> {
  const headers = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };
  const json = async (response: Response): Promise<any> => {
    if (!response.ok) throw new Error(`${response.status} ${await response.text()}`);
    return response.json();
  };
  await Promise.all(
    Array.from({ length: count }, async () => {
      const { thread } = await json(
        await fetch(`${url}/v1/threads`, { method: "POST", headers, body: "{}" }),
      );
      const { run } = await json(
        await fetch(`${url}/v1/threads/${thread.id}/runs`, {
          method: "POST",
          headers,
          body: JSON.stringify({ message: "Remember that I like short lists." }),
        }),
      );
      for (;;) {
        const state = await json(await fetch(`${url}/v1/threads/${thread.id}/runs/${run.id}`, { headers }));
        if (["completed", "failed", "cancelled"].includes(state.run.status)) {
          if (state.run.status !== "completed")
            throw new Error(`a bench run ended ${JSON.stringify(state.run)}`);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }),
  );
}

/** Child side of the stage breakdown: resident size after each stage of a server's start, in one fresh process. */
export async function measureServeStagesInChild([dataDirectory]: string[]): Promise<void> {
  const stages: Array<{ stage: string; rss: number }> = [];
  const mark = (stage: string) => stages.push({ stage, rss: process.memoryUsage().rss });
  mark("Node, the bench runner and tsx");
  const { openDatabase } = await import("../engine/server/store/database.ts");
  const database = await openDatabase({ dataDirectory: dataDirectory! });
  mark("the embedded database (PGlite, its thread), opened");
  const { ModuleCache } = await import("../engine/compiler/module-cache.ts");
  const { compileModuleRuntime } = await import("../engine/agent/module-runtime.ts");
  mark("the engine's code loaded (TypeScript, ts-morph, the compiler), with the first run or prompt");
  const runtime = await compileModuleRuntime(
    {
      modulePath: join(TODO, "context.ts"),
      compiler: { moduleCache: new ModuleCache(), continuationKey: "k".repeat(32) },
    },
    undefined,
  );
  mark("the module analysed, loaded and a first runtime compiled (the first run's, or a prompt's)");
  const execution = await runtime.execute({ code: "function main(moss: Moss) { return 1; }" });
  if (!execution.ok) throw new Error(JSON.stringify(execution.error));
  mark("a first checked execute (the module's type-check worker, a sandbox)");
  await runtime.close();
  await database.close();
  console.log(`${RESULT_MARKER}${JSON.stringify(stages)}`);
}

export async function run(): Promise<void> {
  const directory = await mkdtemp(join(tmpdir(), "moss-serve-memory-"));
  try {
    const dataDirectory = join(directory, "data");
    console.log("\n## moss serve idle memory (the CLI's whole process tree, PGlite, examples/todo)\n");
    console.log(
      `| start | ready in s | tree MiB ${IDLE_SETTLE_MS / 1000} s after ready | tree MiB ${STEADY_MS / 1000} s after ready | goal MiB | ratio to goal |\n|---|---:|---:|---:|---:|---:|`,
    );
    // Idle: 7 s after the ready line (and after each batch of tasks), past the 5 s after its last compile at which a
    // server stops esbuild's services (engine/esbuild-service.ts); and 40 s after it, once V8 gave back what the
    // start left. The goal is held against the second.
    const built = prepare();
    const fresh = await idleTree(built, dataDirectory, IDLE_SETTLE_MS);
    // The model answers each task with one execute that writes a data field, then with an answer.
    const execute: FakeReply = {
      content: "",
      toolCalls: [
        {
          name: "moss",
          arguments: JSON.stringify({
            code: 'function main(moss: Moss) { moss.preferences.push("short lists"); return moss.preferences.length; }',
          }),
        },
      ],
    };
    const model = await startFakeOpenAIServer(
      endlessReplies((index) => (index % 2 === 0 ? execute : { content: "Noted." })),
    );
    const again = await idleTree(built, dataDirectory, IDLE_SETTLE_MS, {
      modelUrl: model.baseUrl,
      count: THREADS,
    }).finally(() => model.close());
    for (const [label, tree] of [
      ["new data directory (database made at start)", fresh],
      ["the same data directory again", again],
    ] as const) {
      console.log(
        `| ${label} | ${(tree.readyMs / 1000).toFixed(1)} | ${(tree.early / MIB).toFixed(0)} | ${(tree.idle / MIB).toFixed(0)} | ${GOAL_MIB} | ${(tree.idle / MIB / GOAL_MIB).toFixed(2)}× |`,
      );
    }
    const { first, after } = again.perThread!;
    console.log(`\n| each thread that ran a task (${THREADS} threads) | MiB | goal MiB |\n|---|---:|---:|`);
    console.log(
      `| after ${THREADS} threads, over the idle server (the first run's type-check worker included) | ${((after - again.idle) / MIB / THREADS).toFixed(1)} | ${THREAD_GOAL_MIB} |`,
    );
    console.log(
      `| threads 2 to ${THREADS}, over the tree after the first | ${((after - first) / MIB / (THREADS - 1)).toFixed(1)} | ${THREAD_GOAL_MIB} |`,
    );
    for (const [title, roles] of [
      ["idle, the same data directory again", again.idleRoles],
      [`after ${THREADS} threads`, again.roles],
    ] as const) {
      console.log(`\n| process (${title}) | count | MiB |\n|---|---:|---:|`);
      for (const [role, { rss, count }] of roles) {
        console.log(`| ${role} | ${count} | ${(rss / MIB).toFixed(0)} |`);
      }
    }
    // The stages are measured on the data directory the CLI made (an existing database, as on every start but the first).
    const stages = await runChild<Array<{ stage: string; rss: number }>>("serve-stages", [
      join(dataDirectory, "pglite"),
    ]);
    console.log(
      "\n| the server process, stage by stage (fresh process) | RSS MiB | added MiB |\n|---|---:|---:|",
    );
    let previous = 0;
    for (const { stage, rss } of stages) {
      console.log(
        `| ${stage} | ${(rss / MIB).toFixed(0)} | ${previous === 0 ? "" : `+${((rss - previous) / MIB).toFixed(0)}`} |`,
      );
      previous = rss;
    }
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}
