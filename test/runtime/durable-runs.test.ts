import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, describe, expect, test } from "vitest";
import { MossCompiler, type MossCompilerOptions } from "../../engine/compiler/moss-compiler.ts";
import { decodeProperties } from "../../engine/context/index.ts";
import { MossError } from "../../engine/errors.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { ApprovalRequest, ClarificationRequest } from "../../engine/types.ts";
import { writeModule } from "../helpers/compile-from-text.ts";
import { okOf, pendingOf } from "../helpers/durable.ts";
import { runNodeScript, type ScriptResult } from "../helpers/node-script.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";

/*
 * Issue 10: durable runs. A run pauses when a host call needs a person's decision (`@approval`, a policy's "ask",
 * `moss.ask`), comes back with `pending: { requests, continuation }`, and `runtime.resume(continuation, answers)`
 * re-runs the code against its log: completed calls are not repeated, the clock and random values replay.
 */

const ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const MODULE = path.join(ROOT, "test/fixtures/durable/context.ts");
const KEY = "a shared continuation key for these tests";

interface HostRobot {
  at: number;
  moves: number;
  notes: string[];
  wipes: number;
}

const runtimes = runtimesClosedAfterAll();

async function compile(
  sandbox: "process" | "in-process",
  configure: (compiler: MossCompiler) => void = () => {},
  options: MossCompilerOptions = {},
): Promise<{ runtime: MossRuntime; robot: HostRobot }> {
  const compiler = new MossCompiler({ sandbox, continuationKey: KEY, ...options });
  configure(compiler);
  const runtime = await compiler.compile(MODULE);
  runtimes.push(runtime);
  return { runtime, robot: runtime.mossInjections().robot as HostRobot };
}

/** The runtime's saved data fields, decoded. */
function saved(runtime: MossRuntime): Record<string, unknown> {
  return decodeProperties(runtime.dumpContext().properties);
}

describe.each(["in-process", "process"] as const)("durable runs (%s driver)", (sandbox) => {
  test("an @approval call pauses the run; approved, it runs once and the run goes on", async () => {
    const { runtime, robot } = await compile(sandbox);
    const code = `async function main(moss: Moss) {
  await moss.robot.note("start");
  const at = await moss.robot.move(3);
  moss.trips++;
  return { at, lines: await moss.robot.note("moved") };
}`;
    const paused = await runtime.execute({ code });
    const pending = pendingOf(paused);
    expect(pending.requests).toHaveLength(1);
    const request = pending.requests[0] as ApprovalRequest;
    expect(request).toMatchObject({
      kind: "approval",
      service: "robot",
      member: "move",
      args: [3],
      reason: "tag",
    });
    expect(request.line).toBe(3);
    expect(request.code).toContain("moss.robot.move(3)");
    // The caret stands under the member called (the call's column, not the line's start).
    const frame = request.code!.split("\n");
    const marked = frame.findIndex((row) => row.startsWith(">"));
    expect(frame[marked + 1]!.indexOf("^")).toBe(frame[marked]!.indexOf("move("));
    expect(robot.moves).toBe(0);
    expect(robot.notes).toEqual(["start"]);
    // A paused run changes no data.
    expect(decodeProperties(paused.context.properties).trips).toBe(0);
    expect(saved(runtime).trips).toBe(0);

    const resumed = await runtime.resume(pending.continuation, { [request.id]: { approved: true } });
    expect(okOf(resumed)).toEqual({ at: 3, lines: 2 });
    // The note made before the pause was replayed, not repeated; the move ran once.
    expect(robot.notes).toEqual(["start", "moved"]);
    expect(robot.moves).toBe(1);
    expect(saved(runtime).trips).toBe(1);
    expect(resumed.calls.map((call) => [call.member, call.outcome])).toEqual([
      ["robot.note", "replayed"],
      ["robot.move", "value"],
      ["robot.note", "value"],
    ]);
  });

  test("a denied call throws ApprovalDenied inside the code, with the reason; the code can catch it", async () => {
    const { runtime, robot } = await compile(sandbox);
    const code = `async function main(moss: Moss) {
  try {
    await moss.robot.move(5);
    return "moved";
  } catch (error) {
    const e = error as Error & { reason?: string };
    return [e.name, e.reason, e.message];
  }
}`;
    const pending = pendingOf(await runtime.execute({ code }));
    const id = pending.requests[0]!.id;
    const resumed = await runtime.resume(pending.continuation, {
      [id]: { approved: false, reason: "too far" },
    });
    const [name, reason, message] = okOf(resumed) as string[];
    expect(name).toBe("ApprovalDenied");
    expect(reason).toBe("too far");
    expect(message).toContain("too far");
    expect(robot.moves).toBe(0);
    expect(resumed.calls[0]?.outcome).toBe("denied");
  });

  test("requests issued in the same turn are reported together", async () => {
    const { runtime, robot } = await compile(sandbox);
    const code = `async function main(moss: Moss) {
  const [a, b, n] = await Promise.all([moss.robot.move(1), moss.robot.move(2), moss.robot.note("side")]);
  return [a, b, n];
}`;
    const pending = pendingOf(await runtime.execute({ code }));
    expect(pending.requests.map((request) => (request as ApprovalRequest).args)).toEqual([[1], [2]]);
    expect(robot.notes).toEqual(["side"]);
    const [first, second] = pending.requests;
    const resumed = await runtime.resume(pending.continuation, {
      [first!.id]: { approved: true },
      [second!.id]: { approved: true },
    });
    expect(okOf(resumed)).toEqual([1, 3, 1]);
    expect(robot.moves).toBe(2);
    expect(robot.notes).toEqual(["side"]);
  });

  test("moss.ask pauses with a clarification; its answer is the promise's value", async () => {
    const { runtime, robot } = await compile(sandbox);
    const code = `async function main(moss: Moss) {
  const way = await moss.ask("Which way?", { choices: ["left", "right"] });
  return moss.robot.note("going " + way);
}`;
    const pending = pendingOf(await runtime.execute({ code }));
    const request = pending.requests[0] as ClarificationRequest;
    expect(request).toMatchObject({
      kind: "clarification",
      question: "Which way?",
      choices: ["left", "right"],
    });
    await expect(runtime.resume(pending.continuation, { [request.id]: { answer: "up" } })).rejects.toThrow(
      /one of "left", "right"/,
    );
    const resumed = await runtime.resume(pending.continuation, { [request.id]: { answer: "left" } });
    expect(okOf(resumed)).toBe(1);
    expect(robot.notes).toEqual(["going left"]);
  });

  test("a run that pauses twice changes its data once, when it ends; a side effect runs exactly once", async () => {
    const { runtime, robot } = await compile(sandbox);
    const code = `async function main(moss: Moss) {
  moss.trips++;
  moss.log.push("begin");
  await moss.robot.note("once");
  const a = await moss.robot.move(1);
  const b = await moss.robot.move(10);
  moss.log.push("end");
  return [a, b];
}`;
    const first = pendingOf(await runtime.execute({ code }));
    const second = pendingOf(
      await runtime.resume(first.continuation, { [first.requests[0]!.id]: { approved: true } }),
    );
    expect(second.requests[0]).toMatchObject({ member: "move", args: [10] });
    expect(second.requests[0]!.id).not.toBe(first.requests[0]!.id);
    expect(robot.moves).toBe(1);
    expect(saved(runtime).trips).toBe(0);
    const done = await runtime.resume(second.continuation, { [second.requests[0]!.id]: { approved: true } });
    expect(okOf(done)).toEqual([1, 11]);
    expect(robot.moves).toBe(2);
    expect(robot.notes).toEqual(["once"]);
    expect(saved(runtime).trips).toBe(1);
    expect(saved(runtime).log).toEqual(["begin", "end"]);
  });

  test("the clock and random values replay on resume", async () => {
    const { runtime } = await compile(sandbox);
    const code = `async function main(moss: Moss) {
  const now = Date.now();
  const before = [now, new Date().getTime(), Math.random(), new Date(Date()).getFullYear()];
  console.log(JSON.stringify(before));
  await moss.robot.move(1);
  return [...before, Date.now() >= now, Math.random()];
}`;
    const paused = await runtime.execute({ code });
    const pending = pendingOf(paused);
    const seenBeforePause = JSON.parse(paused.stdout.trim()) as number[];
    await new Promise((resolve) => setTimeout(resolve, 30));
    const resumed = await runtime.resume(pending.continuation, {
      [pending.requests[0]!.id]: { approved: true },
    });
    const values = okOf(resumed) as [number, number, number, number, boolean, number];
    // The values read before the pause are the logged ones; the run printed them again, identically.
    expect(values.slice(0, 4)).toEqual(seenBeforePause);
    expect(resumed.stdout.trim()).toBe(paused.stdout.trim());
    expect(values[1]).toBeGreaterThanOrEqual(values[0]);
    expect(values[3]).toBe(new Date(values[0]).getFullYear());
    expect(values[4]).toBe(true);
    expect(values[5]).not.toBe(values[2]);
  });

  test("a continuation resumes once: a second resume of it is refused", async () => {
    const { runtime, robot } = await compile(sandbox);
    const pending = pendingOf(
      await runtime.execute({ code: "async function main(moss: Moss) { return moss.robot.move(1); }" }),
    );
    const answers = { [pending.requests[0]!.id]: { approved: true as const } };
    expect(okOf(await runtime.resume(pending.continuation, answers))).toBe(1);
    await expect(runtime.resume(pending.continuation, answers)).rejects.toThrow(/already resumed/);
    expect(robot.moves).toBe(1);
  });

  test("a resumed run that takes another path ends with replay-diverged and keeps nothing", async () => {
    const first = await compile(sandbox, (compiler) => compiler.withLocals({ mode: "north" }));
    const code = `async function main(moss: Moss) {
  moss.trips++;
  await moss.robot.note(mode);
  return moss.robot.move(2);
}`;
    const execution = await first.runtime.execute({ code });
    const pending = pendingOf(execution);
    // The same session (its context) in another runtime, where `mode` differs.
    const other = await compile(sandbox, (compiler) =>
      compiler.withLocals({ mode: "south" }).joinContext(execution.context),
    );
    const resumed = await other.runtime.resume(pending.continuation, {
      [pending.requests[0]!.id]: { approved: true },
    });
    expect(resumed.ok).toBe(false);
    expect(resumed.error?.kind).toBe("replay-diverged");
    expect(resumed.error?.message).toMatch(/robot\.note/);
    expect(resumed.error?.message).toMatch(/other arguments/);
    expect(other.robot.notes).toEqual([]);
    expect(other.robot.moves).toBe(0);
    expect(saved(other.runtime).trips).toBe(0);
  });

  test("tampered, foreign, expired and malformed continuations are refused with continuation-invalid", async () => {
    const { runtime } = await compile(sandbox);
    const pending = pendingOf(
      await runtime.execute({ code: "async function main(moss: Moss) { return moss.robot.move(1); }" }),
    );
    const id = pending.requests[0]!.id;
    const [prefix, body, signature] = pending.continuation.split(".") as [string, string, string];
    const payload = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
    payload.log = [];
    payload.code = "async function main(moss: Moss) { return moss.robot.wipe(); }";
    const tampered = `${prefix}.${Buffer.from(JSON.stringify(payload)).toString("base64url")}.${signature}`;
    const refusal = async (continuation: unknown, pattern: RegExp, on = runtime) => {
      const error = await on.resume(continuation as string, { [id]: { approved: true } }).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(MossError.is(error, "continuation-invalid"), String(error)).toBe(true);
      expect((error as Error).message).toMatch(pattern);
    };
    await refusal(tampered, /signature does not match/);
    await refusal("not a continuation", /not a moss-ts continuation/);
    await refusal(42, /expected a string/);
    const foreign = await compile(sandbox, () => {}, { continuationKey: "another key, sixteen bytes+" });
    await refusal(pending.continuation, /signature does not match/, foreign.runtime);
    const keyless = await compile(sandbox, () => {}, { continuationKey: undefined });
    await refusal(pending.continuation, /signature does not match/, keyless.runtime);

    const shortLived = await compile(sandbox, () => {}, { continuationTtlMs: 1 });
    const soon = pendingOf(
      await shortLived.runtime.execute({
        code: "async function main(moss: Moss) { return moss.robot.move(1); }",
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    await refusal(soon.continuation, /expired at/, shortLived.runtime);
    expect(shortLived.robot.moves).toBe(0);
  });

  test("answers must name pending requests and fit them", async () => {
    const { runtime, robot } = await compile(sandbox);
    const pending = pendingOf(
      await runtime.execute({ code: "async function main(moss: Moss) { return moss.robot.move(1); }" }),
    );
    const id = pending.requests[0]!.id;
    await expect(runtime.resume(pending.continuation, { nope: { approved: true } })).rejects.toThrow(
      /No pending request has the id "nope"/,
    );
    await expect(runtime.resume(pending.continuation, { [id]: { answer: "yes" } })).rejects.toThrow(
      /asks to approve a call/,
    );
    // A partial set is refused (engine/answers.ts), naming the request left out; nothing ran.
    await expect(runtime.resume(pending.continuation, {})).rejects.toThrow(`none was given for "${id}"`);
    expect(robot.moves).toBe(0);
    // None of the refusals used the continuation up.
    expect(okOf(await runtime.resume(pending.continuation, { [id]: { approved: true } }))).toBe(1);
  });

  test("a host policy decides each call: allow, deny or ask", async () => {
    const seen: Array<{ service?: string; member: string; args: unknown[]; line?: number }> = [];
    const { runtime, robot } = await compile(sandbox, (compiler) =>
      compiler.policy((call) => {
        seen.push(call);
        if (call.member === "wipe") return "deny";
        if (call.member === "note" && call.args[0] === "secret") return "ask";
        return "allow";
      }),
    );
    const code = `async function main(moss: Moss) {
  let wiped = "no";
  try { moss.robot.wipe(); wiped = "yes"; } catch (error) { wiped = (error as Error).name; }
  await moss.robot.note("open");
  await moss.robot.note("secret");
  return wiped;
}`;
    const pending = pendingOf(await runtime.execute({ code }));
    expect(pending.requests).toEqual([
      expect.objectContaining({
        kind: "approval",
        member: "note",
        args: ["secret"],
        reason: "policy",
        line: 5,
      }),
    ]);
    expect(seen.map((call) => call.member)).toEqual(["wipe", "note", "note"]);
    expect(seen[0]).toMatchObject({ service: "robot", args: [], line: 3 });
    expect(robot.wipes).toBe(0);
    const done = await runtime.resume(pending.continuation, {
      [pending.requests[0]!.id]: { approved: true },
    });
    expect(okOf(done)).toBe("ApprovalDenied");
    expect(robot.notes).toEqual(["open", "secret"]);
  });

  test("a call that answers with a plain value stops the run at once while it waits: nothing after it runs", async () => {
    const { runtime, robot } = await compile(sandbox, (compiler) =>
      compiler.policy((call) => (call.member === "wipe" ? "ask" : "allow")),
    );
    const code = `async function main(moss: Moss) {
  await moss.robot.note("before");
  let lines = -1;
  try { lines = moss.robot.wipe(); } catch { /* the pause is not the code's to handle */ }
  await moss.robot.note("after " + lines);
  return lines;
}`;
    const paused = await runtime.execute({ code });
    const pending = pendingOf(paused);
    expect(pending.requests).toEqual([
      expect.objectContaining({ member: "wipe", reason: "policy", line: 4 }),
    ]);
    // Without a value to hand the code, the run stopped at the call: no "after -1" (or "[object Promise]") was written.
    expect(robot.notes).toEqual(["before"]);
    expect(robot.wipes).toBe(0);
    const resumed = await runtime.resume(pending.continuation, {
      [pending.requests[0]!.id]: { approved: true },
    });
    expect(okOf(resumed)).toBe(0);
    expect(robot.wipes).toBe(1);
    expect(robot.notes).toEqual(["after 0"]);
  });

  test("execution.calls traces every host call with sizes, never payloads", async () => {
    const { runtime } = await compile(sandbox);
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) { await moss.robot.note("a-very-secret-text"); return moss.robot.position(); }`,
    });
    expect(okOf(execution)).toBe(0);
    expect(execution.calls).toHaveLength(2);
    expect(execution.calls[0]).toMatchObject({ member: "robot.note", line: 1, outcome: "value" });
    expect(execution.calls[0]!.argsBytes).toBeGreaterThan("a-very-secret-text".length);
    expect(execution.calls[1]).toMatchObject({ member: "robot.position", outcome: "value" });
    expect(JSON.stringify(execution.calls)).not.toContain("a-very-secret-text");
  });
});

describe("durable runs across processes", () => {
  const folder = mkdtempSync(path.join(tmpdir(), "moss-durable-"));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));

  function runNode(script: string): Promise<ScriptResult> {
    const file = path.join(folder, `step-${Math.random().toString(36).slice(2)}.mts`);
    return runNodeScript(file, script, { cwd: ROOT });
  }

  test("a continuation saved by one process resumes in another that continues the session with the same module and key", async () => {
    const engine = JSON.stringify(path.join(ROOT, "engine/index.ts"));
    const saved = path.join(folder, "continuation.json");
    const savedContext = path.join(folder, "context.json");
    const prelude = (context: string) => `import { MossCompiler, closeSharedSandboxes } from ${engine};
import { readFileSync, writeFileSync } from "node:fs";
const compiler = new MossCompiler({ continuationKey: ${JSON.stringify(KEY)} });
${context}
const runtime = await compiler.compile(${JSON.stringify(MODULE)});
const robot = runtime.mossInjections().robot;`;
    const first = await runNode(`${prelude("")}
const execution = await runtime.execute({ code: "async function main(moss: Moss) { await moss.robot.note('before'); return moss.robot.move(4); }" });
writeFileSync(${JSON.stringify(saved)}, JSON.stringify(execution.pending));
writeFileSync(${JSON.stringify(savedContext)}, JSON.stringify(execution.context));
console.log(JSON.stringify({ notes: robot.notes, moves: robot.moves }));
await runtime.close();
await closeSharedSandboxes();`);
    expect(first.stderr).toBe("");
    expect(JSON.parse(first.stdout)).toEqual({ notes: ["before"], moves: 0 });
    const second =
      await runNode(`${prelude(`compiler.joinContext(JSON.parse(readFileSync(${JSON.stringify(savedContext)}, "utf8")));`)}
const pending = JSON.parse(readFileSync(${JSON.stringify(saved)}, "utf8"));
const resumed = await runtime.resume(pending.continuation, { [pending.requests[0].id]: { approved: true } });
console.log(JSON.stringify({ ok: resumed.ok, returns: resumed.returns, notes: robot.notes, moves: robot.moves }));
await runtime.close();
await closeSharedSandboxes();`);
    expect(second.stderr).toBe("");
    // The note of the first process is not written again in the second; the approved move runs there once.
    expect(JSON.parse(second.stdout)).toEqual({ ok: true, returns: 4, notes: [], moves: 1 });
  });
});

describe("durable runs: policies from the module, tracing, and runs that cannot pause", () => {
  const POLICY_MODULE = `import { Moss as Base } from "moss-ts";

export interface Files {
  read(name: string): string;
  remove(name: string): boolean;
  /** Renames a file. @approval */
  rename(from: string, to: string): boolean;
  /** Empties the trash. @approval */
  purge: () => number;
}

export class Moss extends Base {
  files!: Files;
}

// <moss-hide>
export const removed: string[] = [];
export function __moss_compile__(compiler: { bind(token: unknown, value: unknown): unknown }) {
  compiler.bind("Files", {
    read: (name: string) => "text of " + name,
    remove: (name: string) => (removed.push(name), true),
    rename: () => true,
    purge: () => 0,
  });
}
export function __moss_policy__(call: { member: string; args: unknown[] }) {
  if (call.member === "remove") return String(call.args[0]).startsWith("tmp/") ? "allow" : "ask";
  return "allow";
}
// </moss-hide>
`;

  test("a module's __moss_policy__ (in its hidden region) decides calls; the prompt does not show it", async () => {
    const file = await writeModule(POLICY_MODULE);
    const runtime = await new MossCompiler({ sandbox: "in-process" }).compile(file);
    runtimes.push(runtime);
    expect(await runtime.prompter().dumpModulePrompt()).not.toContain("__moss_policy__");
    const execution = await runtime.execute({
      code: `function main(moss: Moss) { moss.files.remove("tmp/a"); moss.files.remove("notes.md"); return moss.files.read("x"); }`,
    });
    const pending = pendingOf(execution);
    expect(pending.requests).toEqual([
      expect.objectContaining({
        kind: "approval",
        service: "files",
        member: "remove",
        args: ["notes.md"],
        reason: "policy",
      }),
    ]);
    const resumed = await runtime.resume(pending.continuation, {
      [pending.requests[0]!.id]: { approved: true },
    });
    expect(okOf(resumed)).toBe("text of x");
  });

  test("with durableRuns off, a call that needs a person is denied instead of pausing", async () => {
    const { runtime, robot } = await compile("in-process", () => {}, { durableRuns: false });
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) { try { await moss.robot.move(1); } catch (e) { return (e as Error).message; } }`,
    });
    expect(okOf(execution)).toMatch(/durableRuns is off/);
    expect(robot.moves).toBe(0);
  });

  test("the run and each host call are OpenTelemetry spans when the host registered a tracer provider", async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    trace.setGlobalTracerProvider(provider);
    try {
      const { runtime } = await compile("in-process");
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) { await moss.robot.note("traced"); return moss.robot.position(); }`,
      });
      expect(okOf(execution)).toBe(0);
      await provider.forceFlush();
      const spans = exporter.getFinishedSpans();
      const run = spans.find((span) => span.name === "moss.execute");
      expect(run?.attributes).toMatchObject({ "moss.target": "main", "moss.outcome": "ok", "moss.calls": 2 });
      const calls = spans.filter((span) => span.name.startsWith("moss.call "));
      expect(calls.map((span) => span.name)).toEqual(["moss.call robot.note", "moss.call robot.position"]);
      for (const call of calls) {
        expect(call.parentSpanContext?.spanId).toBe(run?.spanContext().spanId);
        expect(JSON.stringify(call.attributes)).not.toContain("traced");
      }
    } finally {
      trace.disable();
      await provider.shutdown();
    }
  });
});
