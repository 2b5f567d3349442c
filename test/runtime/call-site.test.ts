import { describe, expect, test } from "vitest";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { compileFromText } from "../helpers/compile-from-text.ts";
import { okOf } from "../helpers/durable.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";

/*
 * Issue 17: the isolate finds a host call's line from the few frames down to its caller (the stack is most of a
 * call's cost there), and from the whole stack when the caller is deeper. Every call's trace still names its line,
 * whatever model code does to `Error.stackTraceLimit`, and nothing model code put there runs during a call.
 */

const SOURCE = `import { Moss as Base } from "moss-ts";

/** A counter. */
export abstract class Counter {
  /** Adds one; the new count. */
  abstract add(): number;
  /** The count, or a promise of it. */
  abstract later(fail: boolean): number | Promise<number>;
}

export class Moss extends Base {
  counter!: Counter;
}

// <moss-hide>
export class HostCounter extends Counter {
  count = 0;
  add() {
    return ++this.count;
  }
  later(fail: boolean): number | Promise<number> {
    return fail ? Promise.reject(new Error("not now")) : Promise.resolve(this.count);
  }
}

export function __moss_compile__(compiler: { bind(token: unknown, value: unknown): unknown }) {
  compiler.bind(Counter, new HostCounter());
}
// </moss-hide>
`;

const runtimes = runtimesClosedAfterAll();

async function compile(sandbox: "process" | "in-process"): Promise<MossRuntime> {
  const runtime = await compileFromText(SOURCE, () => {}, { sandbox, typeCheck: "off" });
  runtimes.push(runtime);
  return runtime;
}

const lines = (runtime: MossRuntime, code: string) =>
  runtime.execute({ code }).then((execution) => ({
    returns: okOf(execution),
    lines: execution.calls.map((call) => call.line),
  }));

describe.each(["in-process", "process"] as const)("host call sites (%s driver)", (sandbox) => {
  test("a direct call, a call through a built-in and a call from a nested helper each name their own line", async () => {
    const runtime = await compile(sandbox);
    const traced = await lines(
      runtime,
      `function twice(moss: Moss) {
  return moss.counter.add() +
    moss.counter.add();
}
function main(moss: Moss) {
  const direct = moss.counter.add();
  [1].forEach(moss.counter.add);
  return direct + twice(moss);
}`,
    );
    expect(traced.lines).toEqual([6, 7, 2, 3]);
  });

  test("model code that sets Error.stackTraceLimit to 0 still has its calls' lines traced, and keeps its limit", async () => {
    const runtime = await compile(sandbox);
    const traced = await lines(
      runtime,
      `function main(moss: Moss) {
  (Error as any).stackTraceLimit = 0;
  moss.counter.add();
  return (Error as any).stackTraceLimit;
}`,
    );
    expect(traced.returns).toBe(0);
    expect(traced.lines).toEqual([3]);
  });

  test("Error.stackTraceLimit cannot become an accessor (issue 24 §5: it stays a number the capture sets); calls keep their lines", async () => {
    const runtime = await compile(sandbox);
    const traced = await lines(
      runtime,
      `function main(moss: Moss) {
  let refused = "";
  try {
    Object.defineProperty(Error, "stackTraceLimit", { get() { return 10; }, set() {}, configurable: true });
  } catch (error) {
    refused = (error as Error).name;
  }
  moss.counter.add();
  moss.counter.add();
  return refused;
}`,
    );
    expect(traced.returns).toBe("TypeError");
    expect(traced.lines).toEqual([8, 9]);
  });

  test("a host promise a sync-declared method returns rejects with the caller's line in its stack", async () => {
    const runtime = await compile(sandbox);
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  try {
    await moss.counter.later(true);
    return "resolved";
  } catch (error) {
    return String((error as Error).stack);
  }
}`,
    });
    const stack = okOf(execution) as string;
    expect(stack).toMatch(/^Error: not now/);
    expect(stack).toContain("snippet.js:3");
  });
});
