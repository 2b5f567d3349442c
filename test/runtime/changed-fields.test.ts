import { describe, expect, test } from "vitest";
import { decodeProperties } from "../../engine/context/index.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { useMemoSessions } from "../helpers/memo-session.ts";

// A snapshot carries only the data fields that changed since the sandbox last sent them (issue 17, persist only
// changed fields). A field wrongly taken as unchanged would silently keep its old value: every case below changes a
// value in a way a JSON text of it would not see, and checks both the stored context and a runtime rebuilt from it.
const { compile, run } = useMemoSessions("changed-fields");

/** The stored memo, and the memo a new runtime built from the stored context sees. */
async function storedMemo(sandbox: "in-process" | "process", runtime: MossRuntime): Promise<unknown[]> {
  const context = JSON.parse(JSON.stringify(runtime.dumpContext()));
  const resumed = await compile(sandbox, context);
  const seen = await run(resumed, "return moss.memo;");
  return [decodeProperties(context.properties).memo, seen.returns];
}

const CHANGES: Array<[string, string, string, (memo: unknown) => void]> = [
  [
    "an ISO string replaced by the Date it names",
    `moss.memo = { at: "1970-01-01T00:00:00.042Z" };`,
    `moss.memo.at = new Date(42);`,
    (memo) => expect((memo as { at: unknown }).at).toEqual(new Date(42)),
  ],
  [
    "0 replaced by -0",
    `moss.memo = { n: 0 };`,
    `moss.memo.n = -0;`,
    (memo) => expect(Object.is((memo as { n: number }).n, -0)).toBe(true),
  ],
  [
    "null replaced by undefined in an array",
    `moss.memo = [1, null, 3];`,
    `moss.memo[1] = undefined;`,
    (memo) => expect(memo).toStrictEqual([1, undefined, 3]),
  ],
  [
    "a key added holding undefined",
    `moss.memo = { a: 1 };`,
    `moss.memo.b = undefined;`,
    (memo) => expect(Object.keys(memo as object)).toEqual(["a", "b"]),
  ],
  [
    "a nested value changed in place",
    `moss.memo = { deep: { list: [{ x: 1 }] } };`,
    `moss.memo.deep.list[0].x = 2;`,
    (memo) => expect(memo).toEqual({ deep: { list: [{ x: 2 }] } }),
  ],
  [
    "a Map changed in place",
    `moss.memo = new Map([[1, "one"]]);`,
    `moss.memo.set(2, "two");`,
    (memo) =>
      expect(memo).toEqual(
        new Map([
          [1, "one"],
          [2, "two"],
        ]),
      ),
  ],
  [
    "a shared object replaced by an equal copy",
    `const shared = { v: 1 }; moss.memo = { a: shared, b: shared };`,
    `moss.memo.b = { v: 1 };`,
    (memo) => {
      const { a, b } = memo as { a: object; b: object };
      expect(a).toEqual(b);
      expect(a).not.toBe(b);
    },
  ],
  [
    "two equal objects made one shared object",
    `moss.memo = { a: { v: 1 }, b: { v: 1 } };`,
    `moss.memo.b = moss.memo.a;`,
    (memo) => {
      const { a, b } = memo as { a: object; b: object };
      expect(a).toBe(b);
    },
  ],
  [
    "an object made circular",
    `moss.memo = { name: "loop", self: null };`,
    `moss.memo.self = moss.memo;`,
    (memo) => expect((memo as { self: unknown }).self).toBe(memo),
  ],
];

describe.each(["in-process", "process"] as const)(
  "data fields that changed are persisted (%s sandbox)",
  (sandbox) => {
    test.each(CHANGES)("%s", async (_name, first, second, check) => {
      const runtime = await compile(sandbox);
      await run(runtime, first);
      // A run that leaves the field as it was, then the change a JSON text of it cannot see.
      await run(runtime, "return 1;");
      await run(runtime, second);
      for (const memo of await storedMemo(sandbox, runtime)) check(memo);
    });

    test.each(CHANGES)(
      "%s, in a session rebuilt from the stored context",
      async (_name, first, second, check) => {
        const runtime = await compile(sandbox);
        await run(runtime, first);
        // The rebuilt session's isolate holds the data as installed from the context, not as a snapshot of its own.
        const rebuilt = await compile(sandbox, JSON.parse(JSON.stringify(runtime.dumpContext())));
        await run(rebuilt, "return 1;");
        await run(rebuilt, second);
        for (const memo of await storedMemo(sandbox, rebuilt)) check(memo);
      },
    );

    test("a field left unchanged keeps its value while another changes, and is seen by later runs", async () => {
      const runtime = await compile(sandbox);
      await run(
        runtime,
        `moss.memo = { items: Array.from({ length: 100 }, (_, i) => ({ i, at: new Date(i) })) };`,
      );
      await run(runtime, `moss.other = "one";`);
      await run(runtime, `moss.other = "two";`);
      const seen = await run(
        runtime,
        `return [moss.memo.items.length, moss.memo.items[99].at.getTime(), moss.other];`,
      );
      expect(seen.returns).toEqual([100, 99, "two"]);
      const stored = decodeProperties(runtime.dumpContext().properties) as {
        memo: { items: unknown[] };
        other: string;
      };
      expect(stored.memo.items[99]).toEqual({ i: 99, at: new Date(99) });
      expect(stored.other).toBe("two");
    });

    test("an unchanged field still counts against maxResultBytes", async () => {
      const runtime = await compile(sandbox);
      await run(runtime, `moss.memo = "x".repeat(6000);`);
      const execution = await runtime.execute({
        code: `function main(moss: any) { return "y".repeat(6000); }`,
        limits: { maxResultBytes: 10_000 },
      });
      expect(execution.ok).toBe(false);
      expect(execution.error?.kind).toBe("output-limit");
      const stored = decodeProperties(execution.context.properties) as { memo: string };
      expect(stored.memo).toBe("x".repeat(6000));
    });

    test("a field refused over the limit goes back to its last saved value, also when it was unchanged before", async () => {
      const runtime = await compile(sandbox);
      await run(runtime, `moss.memo = { v: 1 };`);
      await run(runtime, "return 1;");
      const refused = await runtime.execute({
        code: `function main(moss: any) { moss.memo.v = "z".repeat(20_000); }`,
        limits: { maxResultBytes: 10_000 },
      });
      expect(refused.warnings.join("\n")).toMatch(/moss\.memo .*not persisted/);
      const seen = await run(runtime, "return moss.memo;");
      expect(seen.returns).toEqual({ v: 1 });
      expect(decodeProperties(seen.context.properties).memo).toEqual({ v: 1 });
    });
  },
);
