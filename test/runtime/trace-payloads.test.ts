import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";
import { MossCompiler, type MossCompilerOptions } from "../../engine/compiler/moss-compiler.ts";
import { SecretRedactor } from "../../engine/membrane/index.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import {
  boundPayload,
  TRACE_PAYLOAD_BUDGET,
  TRACE_PAYLOAD_CHARS,
  truncationMarker,
} from "../../engine/runtime/trace-payload.ts";
import { okOf, pendingOf } from "../helpers/durable.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";

/*
 * Issue 26, the trace: with `tracePayloads` a host call's record keeps its arguments, result or error as readable
 * text, bounded at 1 KiB with a marker naming the whole size, passed through the host's redactor; by default the
 * trace keeps sizes only.
 */

const ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const MODULE = path.join(ROOT, "test/fixtures/durable/context.ts");
const SECRET = "sk-trace-0123456789abcdefSECRET";

const runtimes = runtimesClosedAfterAll();

async function compile(
  sandbox: "process" | "in-process",
  options: MossCompilerOptions,
): Promise<MossRuntime> {
  const runtime = await new MossCompiler({
    sandbox,
    continuationKey: "a key for the trace tests",
    ...options,
  }).compile(MODULE);
  runtimes.push(runtime);
  return runtime;
}

describe("boundPayload", () => {
  const redactor = new SecretRedactor();
  redactor.add(SECRET);
  const redact = (text: string) => redactor.redactText(text);

  test("a short text is kept whole; a long one is cut at 1 KiB and ends with the marker naming its size", () => {
    expect(boundPayload('["hello"]')).toBe('["hello"]');
    const long = "x".repeat(5000);
    const kept = boundPayload(long);
    expect(kept).toBe(`${"x".repeat(TRACE_PAYLOAD_CHARS)}${truncationMarker(5000)}`);
    expect(kept.endsWith("… (truncated, 5000 bytes)")).toBe(true);
    const huge = "y".repeat(3_000_000);
    expect(boundPayload(huge)).toBe(`${"y".repeat(TRACE_PAYLOAD_CHARS)}… (truncated, 3000000 bytes)`);
  });

  test("a secret is redacted wherever it is, also when the cut falls inside it", () => {
    const prefix = SECRET.slice(0, 8);
    expect(boundPayload(`{"key":"${SECRET}"}`, redact)).toBe('{"key":"[redacted]"}');
    for (const at of [1000, 1020, TRACE_PAYLOAD_CHARS - 3, 2040, 2048 - 10, 2048 - 3, 3000]) {
      const text = `${"a".repeat(at)}${SECRET}${"b".repeat(6000)}`;
      const kept = boundPayload(text, redact);
      expect(kept, `secret at ${at}`).not.toContain(prefix);
      expect(kept.endsWith(truncationMarker(text.length))).toBe(true);
      expect(kept.length).toBeLessThanOrEqual(TRACE_PAYLOAD_CHARS + truncationMarker(text.length).length);
    }
    // Many secrets before the cut shrink the text the redactor returns: still no part of the one across the end.
    const dense = `${SECRET.repeat(60)}${"c".repeat(200)}${SECRET}${"d".repeat(5000)}`;
    expect(boundPayload(dense, redact)).not.toContain(prefix);
  });

  test("a cut never splits a surrogate pair", () => {
    const text = `${"a".repeat(TRACE_PAYLOAD_CHARS - 1)}😀${"b".repeat(100)}`;
    const kept = boundPayload(text);
    expect(kept.startsWith(`${"a".repeat(TRACE_PAYLOAD_CHARS - 1)}…`)).toBe(true);
    expect(kept).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/);
  });
});

describe.each(["in-process", "process"] as const)("trace payloads (%s driver)", (sandbox) => {
  test("by default the trace keeps sizes only", async () => {
    const runtime = await compile(sandbox, {});
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) { await moss.robot.note("a-very-secret-text"); return 1; }`,
    });
    expect(okOf(execution)).toBe(1);
    expect(execution.calls[0]).not.toHaveProperty("args");
    expect(execution.calls[0]).not.toHaveProperty("result");
    expect(JSON.stringify(execution.calls)).not.toContain("a-very-secret-text");
  });

  test("arguments and results as JSON; a huge argument cut with the marker; a secret redacted", async () => {
    const redactor = new SecretRedactor();
    redactor.add(SECRET);
    const runtime = await compile(sandbox, {
      tracePayloads: { redact: (text) => redactor.redactText(text) },
    });
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  await moss.robot.note("hello");
  await moss.robot.note("x".repeat(50000));
  await moss.robot.note("w".repeat(200000));
  await moss.robot.note("key ${SECRET}");
  return moss.robot.position();
}`,
    });
    expect(okOf(execution)).toBe(0);
    const [hello, huge, wire, secret, position] = execution.calls;
    expect(hello).toMatchObject({
      member: "robot.note",
      line: 2,
      outcome: "value",
      args: '["hello"]',
      result: "1",
    });
    expect(huge!.args!.startsWith('["xxxxxxxx')).toBe(true);
    // The marker names the size of the whole rendering: `["` + 50,000 characters + `"]`.
    expect(huge!.args!.endsWith(truncationMarker(50_004))).toBe(true);
    // Past 64 KiB of wire a payload is not decoded (that costs the host): its wire text is kept, cut the same way.
    expect(wire!.args!).toMatch(/^\[\["A",1\],"wwww/);
    expect(wire!.args!.endsWith(truncationMarker(wire!.argsBytes))).toBe(true);
    expect(huge!.args!.length).toBeLessThanOrEqual(TRACE_PAYLOAD_CHARS + 40);
    expect(secret!.args).toBe('["key [redacted]"]');
    expect(JSON.stringify(execution.calls)).not.toContain(SECRET.slice(0, 10));
    expect(position).toMatchObject({ member: "robot.position", args: "[]", result: "0" });
  });

  test("an approval: the person's answer and the replayed calls with their payloads; a denial's error", async () => {
    const runtime = await compile(sandbox, { tracePayloads: true });
    const code = `async function main(moss: Moss) {
  await moss.robot.note("start");
  try {
    return await moss.robot.move(3);
  } catch (error) {
    return (error as Error).name;
  }
}`;
    const paused = await runtime.execute({ code });
    const pending = pendingOf(paused);
    expect(paused.calls.map((call) => [call.member, call.outcome, call.args])).toEqual([
      ["robot.note", "value", '["start"]'],
      ["robot.move", "pending", "[3]"],
    ]);
    const id = pending.requests[0]!.id;
    const approved = await runtime.resume(pending.continuation, { [id]: { approved: true } });
    expect(okOf(approved)).toBe(3);
    expect(approved.calls).toMatchObject([
      { member: "robot.note", outcome: "replayed", args: '["start"]', result: "1" },
      { member: "robot.move", outcome: "value", args: "[3]", result: "3", approval: "approved" },
    ]);
    const again = pendingOf(await runtime.execute({ code }));
    const denied = await runtime.resume(again.continuation, {
      [again.requests[0]!.id]: { approved: false, reason: "too far" },
    });
    expect(okOf(denied)).toBe("ApprovalDenied");
    const move = denied.calls[1]!;
    expect(move).toMatchObject({ outcome: "denied", approval: "denied" });
    expect(move.error).toMatch(/^ApprovalDenied: .*too far/);
    expect(move).not.toHaveProperty("result");
  });

  test("host objects in arguments and results read as what they denote", async () => {
    const runtime = await new MossCompiler({ sandbox, tracePayloads: true }).compile(
      path.join(ROOT, "test/fixtures/durable/approval-context.ts"),
    );
    runtimes.push(runtime);
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const alice = moss.bank.account("alice");
  return moss.bank.transfer(alice, 3);
}`,
    });
    const [account, transfer] = execution.calls;
    expect(account).toMatchObject({ member: "bank.account", args: '["alice"]' });
    expect(account!.result).toMatch(/^"\[.*returned by call 1 \(bank\.account\)\]"$/);
    expect(transfer!.args).toMatch(/^\["\[.*returned by call 1 \(bank\.account\)\]",3\]$/);
  });

  test("one execution keeps a bounded amount of payloads: later calls keep their sizes only", async () => {
    const runtime = await compile(sandbox, { tracePayloads: true });
    const calls = Math.ceil(TRACE_PAYLOAD_BUDGET / TRACE_PAYLOAD_CHARS) + 20;
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) { for (let i = 0; i < ${calls}; i++) await moss.robot.note("z".repeat(5000)); return 0; }`,
    });
    expect(okOf(execution)).toBe(0);
    expect(execution.calls).toHaveLength(calls);
    const kept = execution.calls.reduce(
      (sum, call) => sum + (call.args?.length ?? 0) + (call.result?.length ?? 0),
      0,
    );
    expect(kept).toBeLessThanOrEqual(TRACE_PAYLOAD_BUDGET + TRACE_PAYLOAD_CHARS + 40);
    expect(execution.calls.at(-1)).not.toHaveProperty("args");
    expect(execution.calls.at(-1)!.argsBytes).toBeGreaterThan(5000);
  });
});
