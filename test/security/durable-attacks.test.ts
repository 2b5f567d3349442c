import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { describe, expect, test } from "vitest";
import { MossCompiler, type MossCompilerOptions } from "../../engine/compiler/moss-compiler.ts";
import { decodeProperties } from "../../engine/context/index.ts";
import { MossError } from "../../engine/errors.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { Answers, Execution, PendingRequest } from "../../engine/types.ts";
import { okOf, pendingOf } from "../helpers/durable.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";

/*
 * Red-team attacks on durable runs (issue 10): model code trying to reach an `@approval` member without a person's
 * yes, to repeat or swap side effects across pause and resume, to forge or alter continuations, to tell a replay
 * apart and exploit it, to exhaust the host through the log, and to leak host paths through requests, traces and
 * continuations. Each test asserts the promise on the host's own state (what the host objects recorded).
 */

const ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const MODULE = path.join(ROOT, "test/fixtures/durable/attack-context.ts");
const OTHER_MODULE = path.join(ROOT, "test/fixtures/durable/context.ts");
const KEY = "red team continuation key, long enough";

interface HostSilo {
  launches: string[];
  notes: string[];
  transfers: string[];
}

const runtimes = runtimesClosedAfterAll();

async function compile(
  sandbox: "process" | "in-process",
  options: MossCompilerOptions = {},
  file = MODULE,
): Promise<{ runtime: MossRuntime; silo: HostSilo }> {
  const runtime = await new MossCompiler({ sandbox, continuationKey: KEY, ...options }).compile(file);
  runtimes.push(runtime);
  return { runtime, silo: runtime.mossInjections().silo as HostSilo };
}

function approveAll(execution: Execution, approved = true): Answers {
  return Object.fromEntries(pendingOf(execution).requests.map((request) => [request.id, { approved }]));
}

/** The decoded payload of a continuation, and a way to re-encode it under the original signature. */
/**
 * Answers every pause of a run with `answer` and resumes it until it ends. A call that answers with a plain value
 * stops its run while it waits, so such calls are asked one pause at a time. Returns every pause's requests.
 */
async function drive(
  runtime: MossRuntime,
  execution: Execution,
  answer: (request: PendingRequest) => Answers[string],
): Promise<{ pauses: PendingRequest[][]; final: Execution }> {
  const pauses: PendingRequest[][] = [];
  let current = execution;
  while (current.pending) {
    const { requests, continuation } = current.pending;
    pauses.push(requests);
    if (pauses.length > 50) throw new Error("the run kept pausing");
    current = await runtime.resume(continuation, Object.fromEntries(requests.map((r) => [r.id, answer(r)])));
  }
  return { pauses, final: current };
}

function unpack(continuation: string) {
  const [prefix, body, signature] = continuation.split(".") as [string, string, string];
  const payload = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as Record<string, unknown>;
  const repack = (changed: Record<string, unknown>) =>
    `${prefix}.${Buffer.from(JSON.stringify(changed)).toString("base64url")}.${signature}`;
  return { payload, repack, text: Buffer.from(body, "base64url").toString("utf8") };
}

async function refusedWith(promise: Promise<unknown>, code: "continuation-invalid" | "invalid-argument") {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(MossError.is(error, code), `expected MossError ${code}, got ${String(error)}`).toBe(true);
  return error as MossError;
}

const HOST_FRAGMENTS = [ROOT, homedir(), "file://", "node_modules"];

describe.each(["in-process", "process"] as const)("durable-run attacks (%s driver)", (sandbox) => {
  test("every way model code reaches an @approval member waits for a person; denied, none runs", async () => {
    const { runtime, silo } = await compile(sandbox);
    const attempts = [
      `moss.silo.launch("direct")`,
      `(() => { const m = moss.silo.launch; return m("extracted"); })()`,
      `Reflect.apply(moss.silo.launch, undefined, ["reflect"])`,
      `moss.silo.launch.call(null, "call")`,
      `moss.silo.launch.bind(null)("bind")`,
      `(() => { const { launch } = moss.silo; return launch("destructured"); })()`,
      `new Proxy(moss.silo, {}).launch("proxied")`,
      `Object.assign({}, moss.silo).launch("copied")`,
      `[moss.silo].map((s) => s.launch("mapped"))[0]`,
      `moss.silo.self().launch("re-declared with @param")`,
      `moss.silo.launcher().launch("through the base interface")`,
      `moss.relauncher.launch("second field")`,
      `moss.silo.echo(moss.silo).launch("echoed")`,
      `Promise.resolve().then(() => moss.silo.launch("later"))`,
    ];
    const code = `async function main(moss: Moss) {
  const settled: string[] = [];
  const tries: Array<() => unknown> = [
${attempts.map((attempt) => `    () => ${attempt},`).join("\n")}
  ];
  const all = tries.map(async (attempt, i) => {
    try { await attempt(); settled.push("ran " + i); } catch (e) { settled.push(i + " " + (e as Error).name + " " + (e as Error).message); }
  });
  // A reply that never comes cannot be raced past: the caught pending stays pending.
  await Promise.race([Promise.all(all), Promise.resolve()]);
  moss.silo.launch("fire and forget, never awaited");
  return settled;
}`;
    const execution = await runtime.execute({ code, typeCheck: "off" });
    pendingOf(execution);
    expect(silo.launches).toEqual([]);
    // Each way waits for a person; denied one after another (a launch answers with a plain value, so each stops its
    // run while it waits), none runs.
    const { pauses, final } = await drive(runtime, execution, () => ({ approved: false }));
    const requests = pauses.flat();
    expect(silo.launches).toEqual([]);
    // The echoed silo comes back without members (its position says T): that attempt throws instead of waiting.
    const launches = requests.map((request) => (request as { args: unknown[] }).args[0]);
    expect(launches).not.toContain("echoed");
    expect(launches).toEqual(
      expect.arrayContaining([
        "direct",
        "extracted",
        "reflect",
        "destructured",
        "proxied",
        "mapped",
        "re-declared with @param",
        "through the base interface",
        "second field",
        "later",
        "fire and forget, never awaited",
      ]),
    );
    // Object.assign reads the @approval getter: that read waits too.
    expect(requests.some((request) => "member" in request && request.member === "primed")).toBe(true);
    if (final.error === undefined) {
      const settled = okOf(final) as string[];
      expect(settled.filter((line) => line.startsWith("ran "))).toEqual([]);
    } else {
      expect(["replay-diverged", "runtime"]).toContain(final.error.kind);
    }
    expect(silo.launches).toEqual([]);
  });

  test("reading an @approval getter (host code runs on each read) waits for a person", async () => {
    const { runtime, silo } = await compile(sandbox);
    const code = `async function main(moss: Moss) {
  const reads = [moss.silo.primed, Reflect.get(moss.silo, "primed"), Object.getOwnPropertyDescriptor(moss.silo, "primed")!.get!()];
  return reads;
}`;
    const execution = await runtime.execute({ code, typeCheck: "off" });
    // Each read is its own request, asked one pause at a time (a read answers with a value: it stops the run).
    let round = 0;
    const { pauses, final } = await drive(runtime, execution, () => ({ approved: round++ === 0 }));
    expect(pauses.map((requests) => requests.length)).toEqual([1, 1]);
    for (const request of pauses.flat()) {
      expect(request).toMatchObject({ kind: "approval", member: "primed", reason: "tag" });
    }
    expect(final.error?.name).toBe("ApprovalDenied");
    expect(silo.launches).toEqual(["(primed)"]);

    const again = await runtime.execute({ code, typeCheck: "off" });
    const done = await drive(runtime, again, () => ({ approved: true }));
    expect(done.pauses).toHaveLength(3);
    expect(okOf(done.final)).toEqual([2, 3, 4]);
    expect(silo.launches).toEqual(["(primed)", "(primed)", "(primed)", "(primed)"]);
  });

  test("a resumed run cannot hand an approved call another host object than the one the person approved", async () => {
    const { runtime, silo } = await compile(sandbox);
    // The code tells the replay apart through Intl's clock (not logged) and swaps the account on resume.
    const code = `async function main(moss: Moss) {
  const alice = moss.silo.account("alice");
  const bob = moss.silo.account("bob");
  const parts = new Intl.DateTimeFormat("en", { hour: "numeric", minute: "numeric", second: "numeric", fractionalSecondDigits: 3, hourCycle: "h23", timeZone: "UTC" }).formatToParts();
  const get = (type: string) => Number(parts.find((part) => part.type === type)!.value);
  const real = ((get("hour") * 60 + get("minute")) * 60 + get("second")) * 1000 + get("fractionalSecond");
  const replay = Math.abs(real - (Date.now() % 86_400_000)) > 400;
  return moss.silo.transfer(replay ? bob : alice, 100);
}`;
    const execution = await runtime.execute({ code });
    pendingOf(execution);
    await new Promise((resolve) => setTimeout(resolve, 800));
    const resumed = await runtime.resume(execution.pending!.continuation, approveAll(execution));
    expect(resumed.ok).toBe(false);
    expect(resumed.error?.kind).toBe("replay-diverged");
    expect(silo.transfers).toEqual([]);

    // The honest run (the same host object) resumes and runs the approved transfer once.
    const honest = await runtime.execute({
      code: `async function main(moss: Moss) { const a = moss.silo.account("alice"); moss.silo.account("bob"); return moss.silo.transfer(a, 7); }`,
    });
    expect(okOf(await runtime.resume(pendingOf(honest).continuation, approveAll(honest)))).toBe("alice:7");
    expect(silo.transfers).toEqual(["alice:7"]);
  });

  test("side effects run once across pauses; an approved call runs once; a continuation resumes once", async () => {
    const { runtime, silo } = await compile(sandbox);
    const code = `async function main(moss: Moss) {
  moss.count++;
  moss.silo.note("before, not awaited");
  const [n] = await Promise.all([moss.silo.note("sibling"), moss.silo.launch("one")]);
  let retries = 0;
  for (let i = 0; i < 3; i++) { try { moss.silo.launch("retry " + i); } catch { retries++; } }
  await moss.silo.note("after " + n);
  return retries;
}`;
    const execution = await runtime.execute({ code });
    const first = pendingOf(execution);
    expect(first.requests).toHaveLength(1);
    expect(silo.notes).toEqual(["before, not awaited", "sibling"]);
    expect(decodeProperties(execution.context.properties).count).toBe(0);
    const answers = approveAll(execution);
    const second = await runtime.resume(first.continuation, answers);
    // The retries are new calls: each waits for its own yes (a yes is never reused for another call).
    expect(pendingOf(second).requests.map((request) => (request as { args: unknown[] }).args[0])).toEqual([
      "retry 0",
    ]);
    expect(silo.launches).toEqual(["one"]);
    await refusedWith(runtime.resume(first.continuation, answers), "continuation-invalid");
    const { pauses, final: done } = await drive(runtime, second, () => ({ approved: true }));
    expect(pauses.map((requests) => (requests[0] as { args: unknown[] }).args[0])).toEqual([
      "retry 0",
      "retry 1",
      "retry 2",
    ]);
    expect(okOf(done)).toBe(0);
    expect(silo.launches).toEqual(["one", "retry 0", "retry 1", "retry 2"]);
    expect(silo.notes).toEqual(["before, not awaited", "sibling", "after 2"]);
    expect(decodeProperties(done.context.properties).count).toBe(1);
    await refusedWith(
      runtime.resume(second.pending!.continuation, approveAll(second)),
      "continuation-invalid",
    );
    expect(silo.launches).toHaveLength(4);
  });

  test("an altered, forged or foreign continuation is refused; answers that do not fit are invalid-argument", async () => {
    const { runtime, silo } = await compile(sandbox);
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) { const n = moss.silo.note("x"); return moss.silo.launch("approved target"); }`,
    });
    const pending = pendingOf(execution);
    const id = pending.requests[0]!.id;
    const { payload, repack } = unpack(pending.continuation);
    const log = payload.log as Array<Record<string, unknown>>;
    const alterations: Array<Record<string, unknown>> = [
      { ...payload, code: `async function main(moss: Moss) { return moss.silo.launch("elsewhere"); }` },
      { ...payload, log: [{ ...log[0], result: { kind: "value", wire: "[41]", handles: false } }, log[1]] },
      { ...payload, log: [log[0], { ...log[1], result: { kind: "value", wire: "[0]", handles: false } }] },
      { ...payload, requests: [{ ...pending.requests[0], args: ["elsewhere"] }] },
      { ...payload, expiresAt: Date.now() + 10 * 365 * 86_400_000 },
      { ...payload, data: { count: 1000 } },
      { ...payload, target: "other" },
      { ...payload, v: 2 },
    ];
    for (const altered of alterations) {
      await refusedWith(
        runtime.resume(repack(altered), { [id]: { approved: true } }),
        "continuation-invalid",
      );
    }
    const [prefix, body, signature] = pending.continuation.split(".") as [string, string, string];
    for (const forged of [
      `${prefix}.${body}.${signature.slice(0, -2)}`,
      `${prefix}.${body}.${signature}.extra`,
      `${prefix}.${body}.`,
      `moss2.${body}.${signature}`,
      `${prefix}.${body}x.${signature}`,
      pending.continuation.toUpperCase(),
      "",
    ]) {
      await refusedWith(runtime.resume(forged, { [id]: { approved: true } }), "continuation-invalid");
    }
    // Another module compiled with the same key cannot take it.
    const other = await new MossCompiler({ sandbox, continuationKey: KEY }).compile(OTHER_MODULE);
    runtimes.push(other);
    const foreign = await refusedWith(
      other.resume(pending.continuation, { [id]: { approved: true } }),
      "continuation-invalid",
    );
    expect(foreign.message).toMatch(/made by a run of/);
    for (const answers of [
      null,
      "yes",
      { [id]: { approved: "yes" } },
      { [id]: { approved: true, reason: 42 } },
      { [id]: null },
      { [id]: { answer: "launch" } },
      { r99: { approved: true } },
      { __proto__: { [id]: { approved: true } }, other: { approved: true } },
    ]) {
      await refusedWith(
        runtime.resume(pending.continuation, answers as unknown as Answers),
        "invalid-argument",
      );
    }
    expect(silo.launches).toEqual([]);
    // None of the refusals used the continuation up: the genuine one still resumes, once.
    expect(okOf(await runtime.resume(pending.continuation, { [id]: { approved: true } }))).toBe(1);
    expect(silo.launches).toEqual(["approved target"]);
  });

  test("model code cannot corrupt the clock or random replay to escape or crash the host", async () => {
    const { runtime, silo } = await compile(sandbox);
    const code = `async function main(moss: Moss) {
  const first = [Date.now(), Math.random()];
  for (let i = 0; i < 150_000; i++) Date.now();
  try { (Date as any).now = () => "not a number"; } catch {}
  try { Math.random = () => Infinity; } catch {}
  try { (Date.prototype as any).constructor = function () { return "x"; }; } catch {}
  try { Object.defineProperty(globalThis, "Date", { value: () => { throw new Error("boom"); } }); } catch {}
  const launched = await moss.silo.launch("clock");
  return [first, launched];
}`;
    const execution = await runtime.execute({ code, limits: { cpuTimeMs: 20_000, wallTimeMs: 30_000 } });
    const pending = pendingOf(execution);
    // The isolate's clock log stops at 100k values: the continuation stays small.
    expect(pending.continuation.length).toBeLessThan(8 * 1024 * 1024);
    const { payload } = unpack(pending.continuation);
    const recorded = payload.nondeterminism as { clock: unknown[]; random: unknown[] };
    expect(recorded.clock.every((value) => typeof value === "number")).toBe(true);
    expect(recorded.random.every((value) => typeof value === "number" && value >= 0 && value < 1)).toBe(true);
    const resumed = await runtime.resume(pending.continuation, approveAll(execution), {
      limits: { cpuTimeMs: 20_000, wallTimeMs: 30_000 },
    });
    const [first] = okOf(resumed) as [number[]];
    expect(first).toEqual([recorded.clock[0], recorded.random[0]]);
    expect(silo.launches).toEqual(["clock"]);
  });

  test("a run cannot make the host keep a giant log: past the bound it can no longer pause", async () => {
    const { runtime, silo } = await compile(sandbox);
    // 60 calls of 2 MB each way kept 240 MB for the continuation (a 320 MB string) before the bound.
    const code = `async function main(moss: Moss) {
  const big = "y".repeat(2_000_000);
  for (let i = 0; i < 60; i++) moss.silo.echo(big);
  try { return moss.silo.launch("after the flood"); } catch (e) { return (e as Error).name + ": " + (e as Error).message; }
}`;
    const limits = { wallTimeMs: 60_000, cpuTimeMs: 60_000 };
    const execution = await runtime.execute({ code, limits });
    expect(okOf(execution)).toMatch(/^ApprovalDenied: .*can no longer pause/);
    expect(silo.launches).toEqual([]);

    // A call already waiting when the log overflows (a question: the code goes on while it waits): the run cannot be
    // resumed, so it fails without a continuation.
    const waiting = await runtime.execute({
      code: `async function main(moss: Moss) {
  const launched = moss.ask("first?");
  const big = "z".repeat(2_000_000);
  for (let i = 0; i < 60; i++) moss.silo.echo(big);
  return launched;
}`,
      limits,
    });
    expect(waiting.pending).toBeUndefined();
    expect(waiting.error?.kind).toBe("output-limit");
    expect(silo.launches).toEqual([]);
  });

  test("moss.ask cannot stall the host or blow its memory: huge questions, thousands of asks", async () => {
    const { runtime } = await compile(sandbox);
    const huge = await runtime.execute({
      code: `async function main(moss: Moss) {
  const question = "?".repeat(6_000_000);
  return Promise.all(Array.from({ length: 20 }, () => moss.ask(question)));
}`,
      limits: { wallTimeMs: 60_000, cpuTimeMs: 60_000 },
    });
    expect(huge.pending).toBeUndefined();
    expect(huge.error?.kind).toBe("output-limit");

    const many = await runtime.execute({
      code: `async function main(moss: Moss) {
  return Promise.all(Array.from({ length: 20_000 }, (_, i) => moss.ask("q" + i)));
}`,
      limits: { wallTimeMs: 60_000, cpuTimeMs: 60_000 },
    });
    expect(many.pending).toBeUndefined();
    expect(many.error?.kind).toBe("call-limit");

    const some = await runtime.execute({
      code: `async function main(moss: Moss) {
  const answers = await Promise.all(Array.from({ length: 2_000 }, (_, i) => moss.ask("q" + i, { choices: ["a", "b"] })));
  return answers.join("").length;
}`,
      limits: { wallTimeMs: 60_000, cpuTimeMs: 60_000 },
    });
    const pending = pendingOf(some);
    expect(pending.requests).toHaveLength(2_000);
    const answers = Object.fromEntries(pending.requests.map((request) => [request.id, { answer: "a" }]));
    const resumed = await runtime.resume(pending.continuation, answers, {
      limits: { wallTimeMs: 60_000, cpuTimeMs: 60_000 },
    });
    expect(okOf(resumed)).toBe(2_000);
  });

  test("limits hold during a resumed run: wall time, and host calls counted with the replayed ones", async () => {
    const { runtime, silo } = await compile(sandbox);
    const spin = await runtime.execute({
      code: `async function main(moss: Moss) { await moss.silo.launch("spin"); while (true) {} }`,
    });
    const resumed = await runtime.resume(pendingOf(spin).continuation, approveAll(spin), {
      limits: { wallTimeMs: 1_000, cpuTimeMs: 1_000 },
    });
    expect(resumed.error?.kind).toBe("timeout");
    expect(silo.launches).toEqual(["spin"]);

    const calls = await runtime.execute({
      code: `async function main(moss: Moss) {
  for (let i = 0; i < 8; i++) moss.silo.note("n" + i);
  await moss.silo.launch("count");
  for (let i = 0; i < 8; i++) moss.silo.note("m" + i);
  return "done";
}`,
      limits: { maxHostCalls: 12 },
    });
    const limited = await runtime.resume(pendingOf(calls).continuation, approveAll(calls), {
      limits: { maxHostCalls: 12 },
    });
    expect(limited.error?.kind).toBe("call-limit");
    expect(silo.notes.filter((note) => note.startsWith("m"))).toHaveLength(3);
  });

  test("no host path leaks through requests, calls, spans or the continuation", async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    trace.setGlobalTracerProvider(provider);
    try {
      // The module is named the way the README names it (relative): its display path is the host's own choice.
      const { runtime } = await compile(sandbox, {}, path.relative(process.cwd(), MODULE));
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  let failure = "";
  try { moss.silo.fail(); } catch (e) { failure = (e as Error).message + (e as Error).stack; }
  await moss.silo.launch(failure);
  return failure;
}`,
      });
      const pending = pendingOf(execution);
      const resumed = await runtime.resume(pending.continuation, approveAll(execution));
      expect(okOf(resumed)).toMatch(/cannot open/);
      await provider.forceFlush();
      const seen = JSON.stringify({
        requests: pending.requests,
        continuation: unpack(pending.continuation).text,
        calls: [execution.calls, resumed.calls],
        returns: resumed.returns,
        spans: exporter.getFinishedSpans().map((span) => [span.name, span.attributes, span.status]),
      });
      for (const fragment of HOST_FRAGMENTS) expect(seen).not.toContain(fragment);
    } finally {
      trace.disable();
      await provider.shutdown();
    }
  });
});
