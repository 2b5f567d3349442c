import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";
import { MossCompiler, type MossCompilerOptions } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { CallPolicy, Execution } from "../../engine/types.ts";
import { okOf, pendingOf } from "../helpers/durable.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";

/*
 * Every way model code can make host code run a member declared `@approval` (or one a policy asks for) waits for a
 * person: the member itself, an alias, the intrinsics that call a function (`Function.prototype.call/apply/bind`,
 * `Reflect.apply`), a host function that is handed the function (or class) and calls it, and `new` on a class whose
 * constructor is tagged. Policies fail closed, async policies are awaited, and a denied call of a member that returns
 * a Promise rejects that Promise instead of ending the run. Each test checks the host's own record of what ran.
 */

const ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const MODULE = path.join(ROOT, "test/fixtures/security/call-path-context.ts");

interface HostBank {
  ledger: string[];
  boxes(): string[];
}

const runtimes = runtimesClosedAfterAll();

async function compile(
  sandbox: "process" | "in-process",
  policy?: CallPolicy,
  options: MossCompilerOptions = {},
): Promise<{ runtime: MossRuntime; bank: HostBank }> {
  const compiler = new MossCompiler({ sandbox, ...options });
  if (policy) compiler.policy(policy);
  const runtime = await compiler.compile(MODULE);
  runtimes.push(runtime);
  return { runtime, bank: runtime.mossInjections().bank as HostBank };
}

const run = (runtime: MossRuntime, body: string): Promise<Execution> =>
  runtime.execute({ typeCheck: "off", code: `async function main(moss: Moss) {\n${body}\n}` });

/** Answers every request of a paused run with `approved` and resumes it. */
async function answerAll(runtime: MossRuntime, execution: Execution, approved: boolean): Promise<Execution> {
  const { requests, continuation } = pendingOf(execution);
  return runtime.resume(
    continuation,
    Object.fromEntries(requests.map((request) => [request.id, { approved }])),
  );
}

describe.each(["in-process", "process"] as const)("call-path attacks (%s driver)", (sandbox) => {
  test("an alias, Reflect.apply and Function.prototype.call/apply/bind of a tagged member each ask", async () => {
    const { runtime, bank } = await compile(sandbox);
    const spellings = [
      `const f = moss.bank.transfer; return await f("alias", 1);`,
      `return await Reflect.apply(moss.bank.transfer, undefined, ["reflect", 1]);`,
      `return await Function.prototype.call.call(moss.bank.transfer, null, "call", 1);`,
      `return await Function.prototype.apply.call(moss.bank.transfer, null, ["apply", 1]);`,
      `return await Function.prototype.bind.call(moss.bank.transfer, null, "bind")(1);`,
      `const { pay } = moss.payments; return await pay("destructured", 1);`,
      `return await Reflect.apply(Function.prototype.call, moss.payments.pay, [null, "double", 1]);`,
    ];
    for (const body of spellings) {
      const execution = await run(runtime, body);
      const [request] = pendingOf(execution).requests;
      expect(request, body).toMatchObject({ kind: "approval", reason: "tag" });
      expect(["transfer", "pay"]).toContain((request as { member?: string }).member);
      const denied = await answerAll(runtime, execution, false);
      expect(denied.ok, body).toBe(false);
      expect(denied.error?.name, body).toBe("ApprovalDenied");
    }
    expect(bank.ledger).toEqual([]);
  });

  test("a tagged function handed to a host function that calls it asks before the host call runs", async () => {
    const { runtime, bank } = await compile(sandbox);
    const execution = await run(
      runtime,
      `return await moss.bank.runTask(moss.payments.pay, "mallory", 500);`,
    );
    const [request] = pendingOf(execution).requests;
    expect(request).toMatchObject({ kind: "approval", service: "bank", member: "runTask", reason: "tag" });
    expect(bank.ledger).toEqual([]);
    const denied = await answerAll(runtime, execution, false);
    expect(denied.error?.name).toBe("ApprovalDenied");
    expect(bank.ledger).toEqual([]);
    // A person's yes for the call that hands the function over lets the host call it, once.
    const again = await run(runtime, `return await moss.bank.runTask(moss.payments.pay, "alice", 5);`);
    const approved = await answerAll(runtime, again, true);
    expect(okOf(approved)).toBe("alice:5");
    expect(bank.ledger).toEqual(["pay alice 5"]);
  });

  test("a person's yes for handing a function over covers that call only, not host code's later use of it", async () => {
    const { runtime, bank } = await compile(sandbox);
    const execution = await run(
      runtime,
      `moss.bank.keep(moss.payments.pay);
try { return await moss.bank.runKept("mallory", 500); } catch (error) { return (error as Error).name; }`,
    );
    expect(pendingOf(execution).requests).toEqual([
      expect.objectContaining({ service: "bank", member: "keep", reason: "tag" }),
    ]);
    const resumed = await answerAll(runtime, execution, true);
    expect(okOf(resumed)).toBe("ApprovalDenied");
    expect(resumed.calls.map((call) => [call.member, call.outcome])).toEqual([
      ["bank.keep", "value"],
      ["bank.runKept", "error"],
      ["payments.pay (called by host code)", "denied"],
    ]);
    expect(bank.ledger).toEqual([]);
  });

  test("a function handed over by other paths (a variable, an array, an object) is still the tagged function", async () => {
    const { runtime, bank } = await compile(sandbox);
    for (const body of [
      `const task = [moss.payments.pay][0]; return await moss.bank.runTask(task, "x", 1);`,
      `const box = { task: moss.payments.pay }; return await moss.bank.runTask(box.task, "x", 2);`,
      `return await Promise.resolve(moss.payments.pay).then((task) => moss.bank.runTask(task, "x", 3));`,
    ]) {
      const execution = await run(runtime, body);
      expect(pendingOf(execution).requests[0], body).toMatchObject({ member: "runTask", reason: "tag" });
    }
    expect(bank.ledger).toEqual([]);
  });

  test("a policy's deny reaches host code's own call of a callback: it throws, nothing runs", async () => {
    const { runtime, bank } = await compile(sandbox, (call) => (call.member === "fee" ? "deny" : "allow"));
    const execution = await run(
      runtime,
      `try { return await moss.bank.runTask(moss.payments.fee, 250); } catch (error) { return (error as Error).name + ": " + (error as Error).message; }`,
    );
    expect(okOf(execution)).toMatch(/^ApprovalDenied: fee was not approved/);
    expect(execution.calls.map((call) => [call.member, call.outcome])).toEqual([
      ["bank.runTask", "error"],
      ["payments.fee (called by host code)", "denied"],
    ]);
    expect(bank.ledger).toEqual([]);
  });

  test("an async policy reads what each call acts on: it denies a callback by the field it came from", async () => {
    const seen: Array<[string, string | undefined]> = [];
    const { runtime, bank } = await compile(sandbox, async (call) => {
      seen.push([call.member, call.target]);
      return call.member === "refund" && call.target?.startsWith("moss.payments.refund") ? "deny" : "allow";
    });
    const execution = await run(
      runtime,
      `try { return await moss.bank.runTask(moss.payments.refund, "carol", 7); } catch (error) { return (error as Error).name + ": " + (error as Error).message; }`,
    );
    expect(okOf(execution)).toMatch(/^ApprovalDenied: refund was not approved: denied by the host's policy/);
    expect(execution.calls.map((call) => [call.member, call.outcome])).toEqual([
      ["bank.runTask", "error"],
      ["payments.refund (called by host code)", "denied"],
    ]);
    expect(seen).toContainEqual(["runTask", expect.stringMatching(/^moss\.bank\b/)]);
    expect(seen).toContainEqual(["refund", expect.stringMatching(/^moss\.payments\.refund\b/)]);
    expect(seen.every(([, target]) => target !== undefined && !target.includes("host object"))).toBe(true);
    expect(bank.ledger).toEqual([]);
  });

  test("a policy's ask for a function handed to host code asks on the call that hands it over", async () => {
    const { runtime, bank } = await compile(sandbox, (call) => (call.member === "refund" ? "ask" : "allow"));
    const code = `return await moss.bank.runTask(moss.payments.refund, "carol", 7);`;
    const execution = await run(runtime, code);
    expect(pendingOf(execution).requests).toEqual([
      expect.objectContaining({ service: "bank", member: "runTask", reason: "policy" }),
    ]);
    const denied = await answerAll(runtime, execution, false);
    expect(denied.error?.name).toBe("ApprovalDenied");
    expect(bank.ledger).toEqual([]);
    const approved = await answerAll(runtime, await run(runtime, code), true);
    expect(okOf(approved)).toBe("carol:7");
    expect(bank.ledger).toEqual(["refund carol 7"]);
  });

  test("new on a class whose constructor is @approval asks: new, Reflect.construct, a subclass, a host that builds it", async () => {
    const { runtime, bank } = await compile(sandbox);
    for (const [body, member] of [
      [`return new DepositBox("new").owner;`, "new DepositBox"],
      [`return Reflect.construct(DepositBox, ["reflect"]).owner;`, "new DepositBox"],
      [`return (moss.bank.build(DepositBox, "built") as { owner: string }).owner;`, "build"],
    ] as const) {
      const execution = await run(runtime, body);
      expect(pendingOf(execution).requests[0], body).toMatchObject({ member, reason: "tag" });
      const denied = await answerAll(runtime, execution, false);
      expect(denied.error?.name, body).toBe("ApprovalDenied");
    }
    // A subclass of model code's own cannot even be declared: the host class lends it no prototype.
    const subclass = await run(
      runtime,
      `class Mine extends DepositBox {} return new Mine("subclass").owner;`,
    );
    expect(subclass.error?.name).toBe("TypeError");
    expect(bank.boxes()).toEqual([]);
    const approved = await answerAll(
      runtime,
      await run(runtime, `return new DepositBox("yes").owner;`),
      true,
    );
    expect(okOf(approved)).toBe("yes");
    expect(bank.boxes()).toEqual(["yes"]);
  });

  test("one approved and one denied call of a Promise-returning member: allSettled gives fulfilled and rejected", async () => {
    const { runtime, bank } = await compile(sandbox);
    const execution = await run(
      runtime,
      `const results = await Promise.allSettled([moss.bank.transfer("alice", 1), moss.bank.transfer("mallory", 2)]);
return results.map((result) => result.status === "rejected" ? result.status + " " + result.reason.name : result.status);`,
    );
    const { requests, continuation } = pendingOf(execution);
    expect(requests.map((request) => (request as { args?: unknown[] }).args)).toEqual([
      ["alice", 1],
      ["mallory", 2],
    ]);
    const resumed = await runtime.resume(continuation, {
      [requests[0]!.id]: { approved: true },
      [requests[1]!.id]: { approved: false, reason: "not mallory" },
    });
    expect(okOf(resumed)).toEqual(["fulfilled", "rejected ApprovalDenied"]);
    expect(bank.ledger).toEqual(["transfer alice 1"]);
  });

  test("a policy's deny of a Promise-returning member rejects its Promise; a member that answers at once throws", async () => {
    const { runtime, bank } = await compile(sandbox, (call) =>
      String(call.args[0]).startsWith("mallory") ? "deny" : "allow",
    );
    const execution = await run(
      runtime,
      `const promise = moss.payments.refund("mallory", 1);
let thrown = "none";
try { moss.payments.fee(1); moss.bank.transferNow("mallory", 1); } catch (error) { thrown = (error as Error).name; }
const settled = await Promise.allSettled([promise, moss.payments.refund("bob", 2)]);
return [thrown, settled.map((result) => result.status)];`,
    );
    // transferNow is @approval: the policy's deny wins over the tag, at once.
    expect(okOf(execution)).toEqual(["ApprovalDenied", ["rejected", "fulfilled"]]);
    expect(bank.ledger).toEqual(["refund bob 2"]);
  });

  test("policies fail closed: undefined, another word, a throw or a rejection denies, with a warning naming it", async () => {
    const verdicts: Array<[string, CallPolicy, RegExp]> = [
      ["undefined", (() => undefined) as unknown as CallPolicy, /answered undefined for payments\.refund/],
      ["yes", (() => "yes") as unknown as CallPolicy, /answered "yes" for payments\.refund/],
      [
        "throws",
        () => {
          throw new Error("policy store offline");
        },
        /threw Error: policy store offline for payments\.refund/,
      ],
      [
        "rejects",
        () => Promise.reject(new Error("timeout")),
        /rejected with Error: timeout for payments\.refund/,
      ],
      ["resolves to nothing", (async () => undefined) as unknown as CallPolicy, /answered undefined/],
    ];
    for (const [name, policy, warning] of verdicts) {
      const { runtime, bank } = await compile(sandbox, policy);
      const execution = await run(
        runtime,
        `try { await moss.payments.refund("bob", 1); return "paid"; } catch (error) { return (error as Error).name; }`,
      );
      expect(okOf(execution), name).toBe("ApprovalDenied");
      expect(execution.warnings.join("\n"), name).toMatch(warning);
      expect(bank.ledger, name).toEqual([]);
    }
  });

  test("an async policy is awaited: allow runs, deny rejects, ask pauses and a yes runs the call", async () => {
    const policy: CallPolicy = async (call) => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (call.member === "runTask") return "allow";
      const to = String(call.args[0]);
      return to.startsWith("allowed") ? "allow" : to === "asked" ? "ask" : "deny";
    };
    const { runtime, bank } = await compile(sandbox, policy);
    const execution = await run(runtime, `return moss.payments.fee(1);`);
    // fee answers at once: an async policy cannot be awaited there, so it is denied (and said so).
    expect(execution.error?.name).toBe("ApprovalDenied");
    expect(execution.warnings.join("\n")).toMatch(/answered with a Promise for payments\.fee/);
    const asked = await run(
      runtime,
      `const allowed = await moss.payments.refund("allowed", 2);
const denied = await moss.payments.refund("denied", 1).catch((error: Error) => error.name);
// Host code's call of a callback waits for the policy too.
const viaHost = await moss.bank.runTask(moss.payments.refund, "allowed-by-host", 4);
const deniedViaHost = await moss.bank.runTask(moss.payments.refund, "denied-by-host", 5).catch((error: Error) => error.name);
return [allowed, denied, viaHost, deniedViaHost, await moss.payments.refund("asked", 3)];`,
    );
    const { requests } = pendingOf(asked);
    expect(requests).toEqual([
      expect.objectContaining({ member: "refund", args: ["asked", 3], reason: "policy" }),
    ]);
    expect(bank.ledger).toEqual(["refund allowed 2", "refund allowed-by-host 4"]);
    const approved = await answerAll(runtime, asked, true);
    expect(okOf(approved)).toEqual([
      "allowed:2",
      "ApprovalDenied",
      "allowed-by-host:4",
      "ApprovalDenied",
      "asked:3",
    ]);
    expect(bank.ledger).toEqual(["refund allowed 2", "refund allowed-by-host 4", "refund asked 3"]);
  });

  test("host code keeping a callback cannot call it after the run: it is refused", async () => {
    const { runtime, bank } = await compile(sandbox, () => "allow");
    const kept: unknown[] = [];
    const original = (bank as unknown as { runTask: (task: unknown) => Promise<unknown> }).runTask;
    (bank as unknown as { runTask: (task: unknown) => Promise<unknown> }).runTask = async (task) => {
      kept.push(task);
      return "kept";
    };
    try {
      expect(okOf(await run(runtime, `return await moss.bank.runTask(moss.payments.fee);`))).toBe("kept");
    } finally {
      (bank as unknown as { runTask: unknown }).runTask = original;
    }
    expect(() => (kept[0] as (amount: number) => number)(100)).toThrow(/only be called while the code runs/);
  });
});
