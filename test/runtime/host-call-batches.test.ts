import { describe, expect, test } from "vitest";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { ApprovalRequest } from "../../engine/types.ts";
import { compileFromText } from "../helpers/compile-from-text.ts";
import { okOf, pendingOf } from "../helpers/durable.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";

/*
 * Issue 17: async host calls made in one microtask turn cross together, and each still goes through the run log,
 * the call policies and approvals as if it were made alone: the host sees them in program order, a failing call
 * rejects only its own promise, the call limit counts each, an @approval call in the middle pauses there, and a
 * resume replays the batch's calls from the log in order.
 */

const SOURCE = `import { Moss as Base } from "moss-ts";

/** A shop. */
export abstract class Shop {
  /** Records an event; resolves to how many there are. */
  abstract record(name: string): Promise<number>;
  /** Fails with "no <name>". */
  abstract fail(name: string): Promise<number>;
  /** Records an event at once. */
  abstract mark(name: string): number;
  /** Gives back what it was given (a Promise only when it was given one). */
  abstract same<T>(value: T): T;
  /** A number, or a promise of one. */
  abstract either(): number | Promise<number>;
  /**
   * Pays.
   * @approval
   */
  abstract pay(amount: number): Promise<number>;
}

export class Moss extends Base {
  shop!: Shop;
}

// <moss-hide>
export class HostShop extends Shop {
  events: string[] = [];
  async record(name: string) {
    this.events.push("record " + name);
    return this.events.length;
  }
  async fail(name: string): Promise<number> {
    this.events.push("fail " + name);
    throw new Error("no " + name);
  }
  mark(name: string) {
    this.events.push("mark " + name);
    return this.events.length;
  }
  same<T>(value: T): T {
    this.events.push("same");
    return value;
  }
  either(): number | Promise<number> {
    this.events.push("either");
    return 7;
  }
  async pay(amount: number) {
    this.events.push("pay " + amount);
    return amount;
  }
}

export function __moss_compile__(compiler: { bind(token: unknown, value: unknown): unknown }) {
  compiler.bind(Shop, new HostShop());
}
// </moss-hide>
`;

const runtimes = runtimesClosedAfterAll();

async function compile(
  sandbox: "process" | "in-process",
): Promise<{ runtime: MossRuntime; events: string[] }> {
  const runtime = await compileFromText(SOURCE, () => {}, {
    sandbox,
    continuationKey: "a continuation key for the batch tests",
  });
  runtimes.push(runtime);
  return { runtime, events: (runtime.mossInjections().shop as { events: string[] }).events };
}

describe.each(["in-process", "process"] as const)("host call batches (%s driver)", (sandbox) => {
  test("the host and the run log see the calls of one turn in program order, around a sync call", async () => {
    const { runtime, events } = await compile(sandbox);
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const a = moss.shop.record("a");
  const b = moss.shop.record("b");
  const m = moss.shop.mark("m");
  const c = moss.shop.record("c");
  return [await a, await b, m, await c];
}`,
    });
    expect(okOf(execution)).toEqual([1, 2, 3, 4]);
    expect(events).toEqual(["record a", "record b", "mark m", "record c"]);
    expect(execution.calls.map((call) => [call.member, call.line])).toEqual([
      ["shop.record", 2],
      ["shop.record", 3],
      ["shop.mark", 4],
      ["shop.record", 5],
    ]);
  });

  test("a method that may answer with a plain value is never batched: its value arrives at once", async () => {
    const { runtime, events } = await compile(sandbox);
    const execution = await runtime.execute({
      code: `function main(moss: Moss) {
  const pending = moss.shop.record("a");
  return [moss.shop.same(5) + 1, moss.shop.either(), typeof pending.then];
}`,
    });
    expect(okOf(execution)).toEqual([6, 7, "function"]);
    expect(events).toEqual(["record a", "same", "either"]);
  });

  test("a call that fails in the middle of a batch rejects only its own promise, with the same message", async () => {
    const { runtime, events } = await compile(sandbox);
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  const settled = await Promise.allSettled([moss.shop.record("a"), moss.shop.fail("b"), moss.shop.record("c")]);
  return settled.map((entry) => (entry.status === "fulfilled" ? entry.value : (entry.reason as Error).message));
}`,
    });
    expect(okOf(execution)).toEqual([1, "no b", 3]);
    expect(events).toEqual(["record a", "fail b", "record c"]);
  });

  test("a batch that crosses the call limit ends the run with call-limit; the calls past it never run", async () => {
    const { runtime, events } = await compile(sandbox);
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  await Promise.all([1, 2, 3, 4].map((n) => moss.shop.record(String(n))));
  return "done";
}`,
      limits: { maxHostCalls: 2 },
    });
    expect(execution.ok).toBe(false);
    expect(execution.error).toMatchObject({
      kind: "call-limit",
      message: expect.stringContaining("limit of 2 host calls"),
    });
    expect(events).toEqual(["record 1", "record 2"]);
  });

  test("an @approval call in the middle of a batch pauses there; the resume replays the batch in order", async () => {
    const { runtime, events } = await compile(sandbox);
    const code = `async function main(moss: Moss) {
  const [a, paid, c] = await Promise.all([moss.shop.record("a"), moss.shop.pay(5), moss.shop.record("c")]);
  const d = await moss.shop.record("d");
  return [a, paid, c, d];
}`;
    const pending = pendingOf(await runtime.execute({ code }));
    expect(pending.requests).toHaveLength(1);
    expect(pending.requests[0]).toMatchObject({ kind: "approval", member: "pay", args: [5] });
    // The calls around the one waiting ran as they would have one by one; nothing after the turn did.
    expect(events).toEqual(["record a", "record c"]);
    const request = pending.requests[0] as ApprovalRequest;
    const resumed = await runtime.resume(pending.continuation, { [request.id]: { approved: true } });
    expect(okOf(resumed)).toEqual([1, 5, 2, 4]);
    // Replayed from the log, not run again: only the approved call and the calls after the pause reach the host.
    expect(events).toEqual(["record a", "record c", "pay 5", "record d"]);
    expect(resumed.calls.map((call) => [call.member, call.outcome])).toEqual([
      ["shop.record", "replayed"],
      ["shop.pay", "value"],
      ["shop.record", "replayed"],
      ["shop.record", "value"],
    ]);
  });
});
