import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { MossError } from "../../engine/errors.ts";
import { describeRequest } from "../../engine/format-value.ts";
import { MAX_CONTINUATION_RESULTS } from "../../engine/runtime/continuation.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type {
  Answers,
  ApprovalRequest,
  CallPolicy,
  Execution,
  MossContext,
  PolicyCall,
} from "../../engine/types.ts";
import { okOf, pendingOf } from "../helpers/durable.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";

/*
 * Attacks on what an approval means (issue 15, parts 1 and 6): an approval approves exactly the call the person saw —
 * that member, on that object (the service field or the logged call that produced the handle), with those arguments,
 * in that session. Each test asserts the promise on the host's own state (what the host bank recorded).
 */

const ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const MODULE = path.join(ROOT, "test/fixtures/durable/approval-context.ts");
const KEY = "approval attacks continuation key, long enough";

interface HostBank {
  transfers: string[];
  closed: string[];
  notes: string[];
  wipes: number;
  wrapped: string[];
}

const runtimes = runtimesClosedAfterAll();

async function compile(
  sandbox: "process" | "in-process",
  options: { context?: MossContext; policy?: CallPolicy; limits?: Record<string, number> } = {},
): Promise<{ runtime: MossRuntime; bank: HostBank }> {
  const compiler = new MossCompiler({
    sandbox,
    continuationKey: KEY,
    ...(options.limits ? { limits: options.limits } : {}),
  });
  if (options.context) compiler.joinContext(options.context);
  if (options.policy) compiler.policy(options.policy);
  const runtime = await compiler.compile(MODULE);
  runtimes.push(runtime);
  return { runtime, bank: runtime.mossInjections().bank as HostBank };
}

function approveAll(execution: Execution): Answers {
  return Object.fromEntries(pendingOf(execution).requests.map((request) => [request.id, { approved: true }]));
}

function approvals(execution: Execution): ApprovalRequest[] {
  return pendingOf(execution).requests.filter(
    (request): request is ApprovalRequest => request.kind === "approval",
  );
}

async function refusedWith(promise: Promise<unknown>, code: "continuation-invalid" | "invalid-argument") {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(MossError.is(error, code), `expected MossError ${code}, got ${String(error)}`).toBe(true);
  return error as MossError;
}

/**
 * True in a resumed run: Intl's clock is not replayed, Date.now is. The test waits before resuming, so the two
 * differ by more than the margin only on the replay.
 */
const IS_REPLAY = `(() => {
  const parts = new Intl.DateTimeFormat("en", { hour: "numeric", minute: "numeric", second: "numeric", fractionalSecondDigits: 3, hourCycle: "h23", timeZone: "UTC" }).formatToParts();
  const get = (type: string) => Number(parts.find((part) => part.type === type)!.value);
  const real = ((get("hour") * 60 + get("minute")) * 60 + get("second")) * 1000 + get("fractionalSecond");
  return Math.abs(real - (Date.now() % 86_400_000)) > 400;
})()`;

const pause = () => new Promise((resolve) => setTimeout(resolve, 700));

describe.each(["in-process", "process"] as const)("approval attacks (%s driver)", (sandbox) => {
  describe("a handle is matched to what it denoted, never to whatever shows up", () => {
    test("resumed in another runtime of the session, the code cannot pass another field's object to the approved call", async () => {
      const first = await compile(sandbox);
      const code = `async function main(moss: Moss) {
  const replay = ${IS_REPLAY};
  return moss.bank.transfer(replay ? moss.checking : moss.savings, 100);
}`;
      const execution = await first.runtime.execute({ code });
      expect(approvals(execution)[0]!.args).toEqual(["[moss.savings: Account]", 100]);
      await pause();
      // What resuming a saved session does: a new runtime of the same session (its context).
      const second = await compile(sandbox, { context: execution.context });
      const resumed = await second.runtime.resume(execution.pending!.continuation, approveAll(execution));
      expect(resumed.error?.kind).toBe("replay-diverged");
      expect(resumed.error?.message).toMatch(/bank\.transfer with other arguments/);
      expect(second.bank.transfers).toEqual([]);
      expect(first.bank.transfers).toEqual([]);
    });

    test("the code cannot make an approved call act on another object a call returned (the receiver is matched)", async () => {
      const { runtime, bank } = await compile(sandbox);
      const code = `async function main(moss: Moss) {
  const [alice, bob] = moss.bank.pair("alice", "bob");
  const replay = ${IS_REPLAY};
  return (replay ? bob : alice).close();
}`;
      const execution = await runtime.execute({ code });
      const [request] = approvals(execution);
      expect(request).toMatchObject({ member: "close", target: "Account #1 returned by call 1 (bank.pair)" });
      await pause();
      const resumed = await runtime.resume(execution.pending!.continuation, approveAll(execution));
      expect(resumed.error?.kind).toBe("replay-diverged");
      expect(resumed.error?.message).toMatch(/on another object than/);
      expect(bank.closed).toEqual([]);
    });

    test("resumed in another runtime, the receiver and arguments must be what the logged calls returned", async () => {
      const first = await compile(sandbox);
      const code = `async function main(moss: Moss) {
  const [alice, bob] = moss.bank.pair("alice", "bob");
  const replay = ${IS_REPLAY};
  await moss.bank.transfer(replay ? bob : alice, 5);
  return "done";
}`;
      const execution = await first.runtime.execute({ code });
      expect(approvals(execution)[0]!.args).toEqual(["[Account #1 returned by call 1 (bank.pair)]", 5]);
      await pause();
      const second = await compile(sandbox, { context: execution.context });
      const resumed = await second.runtime.resume(execution.pending!.continuation, approveAll(execution));
      expect(resumed.error?.kind).toBe("replay-diverged");
      expect(second.bank.transfers).toEqual([]);
    });

    test("a call run again in another runtime that answers otherwise leaves the log: nothing approved runs", async () => {
      const first = await compile(sandbox);
      const execution = await first.runtime.execute({
        code: `async function main(moss: Moss) {
  const [alice] = moss.bank.pair("alice", "bob");
  return moss.bank.transfer(alice, 8);
}`,
      });
      const second = await compile(sandbox, { context: execution.context });
      (second.bank as HostBank & { grown: boolean }).grown = true;
      const resumed = await second.runtime.resume(execution.pending!.continuation, approveAll(execution));
      expect(resumed.error?.kind).toBe("replay-diverged");
      expect(resumed.error?.message).toMatch(/bank\.pair, run again, answered otherwise/);
      expect(second.bank.transfers).toEqual([]);
    });

    test("the honest run resumes in another runtime of its session and acts once on the objects approved", async () => {
      const first = await compile(sandbox);
      const code = `async function main(moss: Moss) {
  const [alice] = moss.bank.pair("alice", "bob");
  const a = await moss.bank.transfer(alice, 1);
  const b = await moss.bank.transfer(moss.checking, 2);
  return [a, b, await alice.close()];
}`;
      let execution = await first.runtime.execute({ code });
      const second = await compile(sandbox, { context: execution.context });
      while (execution.pending) {
        execution = await second.runtime.resume(execution.pending.continuation, approveAll(execution));
      }
      expect(okOf(execution)).toEqual(["alice:1", "checking:2", "closed alice"]);
      expect(second.bank.transfers).toEqual(["alice:1", "checking:2"]);
      expect(second.bank.closed).toEqual(["alice"]);
      expect(first.bank.transfers).toEqual([]);
    });
  });

  describe("the policy sees the field the code used", () => {
    test("one object bound to two fields: a policy that denies one field is not passed through the other", async () => {
      const seen: PolicyCall[] = [];
      const { runtime, bank } = await compile(sandbox, {
        policy: (call) => {
          seen.push(call);
          return call.service === "bank" && call.member === "wipe" ? "deny" : "allow";
        },
      });
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  try { await moss.bank.wipe(); return "wiped"; } catch (e) { return (e as Error).name; }
}`,
      });
      expect(okOf(execution)).toBe("ApprovalDenied");
      expect(seen.map((call) => `${call.service}.${call.member}`)).toEqual(["bank.wipe"]);
      expect(bank.wipes).toBe(0);
    });

    test("the narrowed view of a service offers only its own members, and its calls are named by its field", async () => {
      const { runtime, bank } = await compile(sandbox);
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  const teller = moss.teller as any;
  const tries: string[] = [];
  for (const attempt of [() => teller.wipe(), () => Reflect.get(teller, "wipe").call(teller), () => teller.note("x")]) {
    try { await attempt(); tries.push("ran"); } catch (e) { tries.push((e as Error).name); }
  }
  moss.teller.transfer(moss.savings, 9);
  return tries;
}`,
        typeCheck: "off",
      });
      const [request] = approvals(execution);
      expect(request).toMatchObject({ service: "teller", member: "transfer", target: "moss.teller: Teller" });
      expect(bank.wipes).toBe(0);
      expect(bank.notes).toEqual([]);
    });
  });

  describe("the person can tell what they approve", () => {
    test("requests on different objects never look the same; handles are described by what they are", async () => {
      const { runtime, bank } = await compile(sandbox);
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  const [alice, bob] = moss.bank.pair("alice", "bob");
  return Promise.all([
    moss.bank.transfer(moss.savings, 5),
    moss.bank.transfer(moss.checking, 5),
    moss.teller.transfer(moss.savings, 5),
    alice.close(),
    bob.close(),
  ]);
}`,
      });
      const requests = approvals(execution).map(({ service, member, target, args }) => ({
        service,
        member,
        target,
        args,
      }));
      expect(requests).toEqual([
        {
          service: "bank",
          member: "transfer",
          target: "moss.bank: Bank",
          args: ["[moss.savings: Account]", 5],
        },
        {
          service: "bank",
          member: "transfer",
          target: "moss.bank: Bank",
          args: ["[moss.checking: Account]", 5],
        },
        {
          service: "teller",
          member: "transfer",
          target: "moss.teller: Teller",
          args: ["[moss.savings: Account]", 5],
        },
        { service: "bank", member: "close", target: "Account #1 returned by call 1 (bank.pair)", args: [] },
        { service: "bank", member: "close", target: "Account #2 returned by call 1 (bank.pair)", args: [] },
      ]);
      expect(new Set(requests.map((request) => JSON.stringify(request))).size).toBe(requests.length);
      // As the CLI and the agent print them, too.
      const printed = approvals(execution).map(describeRequest);
      expect(new Set(printed).size).toBe(requests.length);
      expect(printed[3]).toMatch(
        // (A request id names its call and its run: r<call>-<12 hex digits>.)
        /^#r\d+-[0-9a-f]{12} approval bank\.close\(\) on Account #1 returned by call 1 \(bank\.pair\) at line 7$/,
      );
      expect(JSON.stringify(requests)).not.toContain("[host object]");
      expect(bank.transfers).toEqual([]);
    });

    test("a policy reads the same descriptions: it can deny closing one account and allow another", async () => {
      const { runtime, bank } = await compile(sandbox, {
        policy: (call) =>
          call.member === "close" && call.target?.startsWith("moss.checking") ? "deny" : "allow",
      });
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  const results = await Promise.allSettled([(async () => moss.checking.close())(), (async () => moss.savings.close())()]);
  return results.map((result) => result.status);
}`,
      });
      const [request] = approvals(execution);
      expect(request).toMatchObject({ service: "savings", member: "close", target: "moss.savings: Account" });
      const resumed = await runtime.resume(execution.pending!.continuation, approveAll(execution));
      expect(okOf(resumed)).toEqual(["rejected", "fulfilled"]);
      expect(bank.closed).toEqual(["savings"]);
    });
  });

  describe("__moss_exec__ wraps every run", () => {
    test("a resumed run goes through __moss_exec__; the hook cannot change the code the person approved", async () => {
      const { runtime, bank } = await compile(sandbox);
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) { return moss.bank.transfer(moss.savings, 3); }`,
      });
      const resumed = await runtime.resume(execution.pending!.continuation, approveAll(execution));
      expect(okOf(resumed)).toBe("savings:3");
      expect(bank.wrapped).toEqual(["execute", "resume"]);

      const changed = await runtime.execute({
        code: `async function main(moss: Moss) {
  // hook: change the code
  return moss.bank.transfer(moss.savings, 4);
}`,
      });
      await refusedWith(
        runtime.resume(changed.pending!.continuation, approveAll(changed)),
        "invalid-argument",
      );
      expect(bank.wrapped).toEqual(["execute", "resume", "execute", "resume"]);
      expect(bank.transfers).toEqual(["savings:3"]);
    });
  });

  describe("a continuation belongs to its session", () => {
    test("another session of the same module and key cannot resume it; the same session in a new runtime can", async () => {
      const mine = await compile(sandbox);
      const execution = await mine.runtime.execute({
        code: `async function main(moss: Moss) { moss.count++; return moss.bank.transfer(moss.savings, 50); }`,
      });
      const { continuation } = pendingOf(execution);
      const sessionId = execution.context.id;
      expect(typeof sessionId).toBe("string");
      const other = await compile(sandbox);
      const refused = await refusedWith(
        other.runtime.resume(continuation, approveAll(execution)),
        "continuation-invalid",
      );
      expect(refused.message).toMatch(/another session/);
      // Another session's context with the same data: still another session.
      const copied = await compile(sandbox, { context: { ...execution.context, id: "someone-else" } });
      await refusedWith(copied.runtime.resume(continuation, approveAll(execution)), "continuation-invalid");
      expect([other.bank.transfers, copied.bank.transfers, mine.bank.transfers]).toEqual([[], [], []]);
      // None of the refusals used it up: the session's own new runtime resumes it, once.
      const same = await compile(sandbox, { context: execution.context });
      expect(okOf(await same.runtime.resume(continuation, approveAll(execution)))).toBe("savings:50");
      expect(same.bank.transfers).toEqual(["savings:50"]);
      expect(same.runtime.dumpContext().id).toBe(sessionId);
    });

    test("a context document written before sessions had ids loads, gets an id, and keeps it", async () => {
      const { runtime } = await compile(sandbox, {
        context: { version: 1, module: MODULE, properties: {}, executed: false },
      });
      const id = runtime.dumpContext().id;
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) { return moss.bank.transfer(moss.checking, 1); }`,
      });
      expect(execution.context.id).toBe(id);
      const again = await compile(sandbox, { context: execution.context });
      expect(okOf(await again.runtime.resume(execution.pending!.continuation, approveAll(execution)))).toBe(
        "checking:1",
      );
    });
  });

  describe("a continuation stays small", () => {
    test("within its documented bound, the clock and random log counted; a run past it cannot pause and nothing ran", async () => {
      const maxResultBytes = 256 * 1024;
      const { runtime, bank } = await compile(sandbox, { limits: { maxResultBytes } });
      const bound = (MAX_CONTINUATION_RESULTS * maxResultBytes * 4) / 3 + 200;
      // 100k clock and 100k random reads log about 3.4 MB: more than this run may keep.
      const noisy = await runtime.execute({
        code: `async function main(moss: Moss) {
  let sum = 0;
  for (let i = 0; i < 100_000; i++) sum += Date.now() + Math.random();
  return moss.bank.transfer(moss.savings, sum > 0 ? 1 : 2);
}`,
        limits: { cpuTimeMs: 30_000, wallTimeMs: 60_000 },
      });
      expect(noisy.pending).toBeUndefined();
      expect(noisy.error?.kind).toBe("output-limit");
      expect(noisy.error?.message).toMatch(/continuation/);
      expect(bank.transfers).toEqual([]);

      // Quotes in an argument: a wire text (JSON) kept as a string in the payload escaped each one twice.
      const quoted = await runtime.execute({
        code: `async function main(moss: Moss) {
  await moss.bank.note('"'.repeat(60_000));
  return moss.bank.transfer(moss.savings, 1);
}`,
      });
      const { continuation } = pendingOf(quoted);
      expect(continuation.length).toBeLessThan(bound);
      // The argument's 60k quotes are written once as JSON (\" each, 120k), never escaped again (240k).
      expect(continuation.length).toBeLessThan((4 / 3) * 130_000);
      expect(okOf(await runtime.resume(continuation, approveAll(quoted)))).toBe("savings:1");
      expect(bank.notes).toEqual(['"'.repeat(60_000)]);
    });
  });

  describe("approval requests, policies and the trace name the call's own line", () => {
    test("calls on continuation lines report their own lines", async () => {
      const lines: Array<number | undefined> = [];
      const { runtime } = await compile(sandbox, {
        policy: (call) => {
          if (call.member === "note") lines.push(call.line);
          return "allow";
        },
      });
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  await Promise.all([
    moss.bank.note("a"),
    moss.bank.note("b"),
  ]);
  return Promise.all([
    moss.bank.transfer(moss.savings, 1),
    moss.bank.transfer(
      moss.checking,
      2,
    ),
  ]);
}`,
      });
      expect(lines).toEqual([3, 4]);
      expect(execution.calls.map((call) => [call.member, call.line])).toEqual([
        ["bank.note", 3],
        ["bank.note", 4],
        ["bank.transfer", 7],
        ["bank.transfer", 8],
      ]);
      const requests = approvals(execution);
      expect(requests.map((request) => request.line)).toEqual([7, 8]);
      expect(requests[0]!.code).toContain("> 7 |     moss.bank.transfer(moss.savings, 1),");
    });
  });
});
