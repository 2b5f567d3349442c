import { describe, expect, test } from "vitest";
import { decodeProperties } from "../../engine/context/index.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { type MemoSandbox as Sandbox, useMemoSessions } from "../helpers/memo-session.ts";

// Issue 17, persist only changed fields: the isolate skips comparing a data field model code has never reached in
// this session (dirty tracking on `moss`). Each case starts from a session rebuilt from a stored context, whose
// fields no code of that session has touched yet, so a field wrongly taken as untouched would silently keep its old
// value. `moss` must behave as the plain object it was in everything model code can do with it.
const { compile, run } = useMemoSessions("untouched-fields");

/** A session rebuilt from a context holding memo = [1, 2, 3] and other = "kept", after two runs that touch neither. */
async function untouchedSession(sandbox: Sandbox): Promise<MossRuntime> {
  const first = await compile(sandbox);
  await run(first, `moss.memo = [1, 2, 3]; moss.other = "kept";`);
  const rebuilt = await compile(sandbox, JSON.parse(JSON.stringify(first.dumpContext())));
  await run(rebuilt, "return 1;");
  await run(rebuilt, "return 2;");
  return rebuilt;
}

/** What the stored context holds, and what a new session built from it sees. */
async function stored(sandbox: Sandbox, runtime: MossRuntime): Promise<unknown[]> {
  const context = JSON.parse(JSON.stringify(runtime.dumpContext()));
  const resumed = await compile(sandbox, context);
  const seen = await run(resumed, "return [moss.memo, moss.other];");
  const properties = decodeProperties(context.properties) as { memo: unknown; other: unknown };
  return [[properties.memo, properties.other], seen.returns];
}

// Each way model code can get hold of a field's value, kept in a global; the next run changes it through the global.
const ESCAPES: Array<[string, string]> = [
  ["a property read", "globalThis.kept = moss.memo;"],
  ["destructuring", "const { memo } = moss; globalThis.kept = memo;"],
  ["a spread copy", "globalThis.kept = { ...moss }.memo;"],
  ["Object.values", "globalThis.kept = Object.values(moss)[0];"],
  ["Object.assign", "globalThis.kept = Object.assign({}, moss).memo;"],
  ["its property descriptor", `globalThis.kept = Object.getOwnPropertyDescriptor(moss, "memo").value;`],
  [
    "Object.getOwnPropertyDescriptors",
    "globalThis.kept = Object.getOwnPropertyDescriptors(moss).memo.value;",
  ],
  ["Reflect.get", `globalThis.kept = Reflect.get(moss, "memo");`],
  ["an object inheriting from moss", "globalThis.kept = Object.create(moss).memo;"],
  ["for…in", "for (const key in moss) if (key === 'memo') globalThis.kept = moss[key];"],
  ["a closure kept for later", "const memo = moss.memo; globalThis.later = () => memo;"],
];

describe.each(["in-process", "process"] as const)("untouched data fields (%s sandbox)", (sandbox) => {
  test.each(ESCAPES)(
    "a field reached by %s and changed through that reference in a later run is persisted",
    async (_name, reach) => {
      const runtime = await untouchedSession(sandbox);
      await run(runtime, reach);
      await run(runtime, "return 3;");
      await run(runtime, "(globalThis.kept ?? globalThis.later()).push(4);");
      const expected = [[1, 2, 3, 4], "kept"];
      for (const fields of await stored(sandbox, runtime)) expect(fields).toEqual(expected);
    },
  );

  test("a field changed in place in the run that reached it is persisted", async () => {
    const runtime = await untouchedSession(sandbox);
    await run(runtime, "moss.memo.push(4);");
    for (const fields of await stored(sandbox, runtime)) expect(fields).toEqual([[1, 2, 3, 4], "kept"]);
  });

  test("assignment replaces the field and is persisted; the other field keeps its value", async () => {
    const runtime = await untouchedSession(sandbox);
    const seen = await run(runtime, `moss.memo = { replaced: true }; return [moss.memo, moss.other];`);
    expect(seen.returns).toEqual([{ replaced: true }, "kept"]);
    for (const fields of await stored(sandbox, runtime)) expect(fields).toEqual([{ replaced: true }, "kept"]);
  });

  test("defineProperty with a new value is persisted", async () => {
    const runtime = await untouchedSession(sandbox);
    await run(runtime, `Object.defineProperty(moss, "memo", { value: "defined" });`);
    for (const fields of await stored(sandbox, runtime)) expect(fields).toEqual(["defined", "kept"]);
  });

  test("the fields are plain, enumerable data properties: keys, spread, JSON, in, for…in", async () => {
    const runtime = await untouchedSession(sandbox);
    const seen = await run(
      runtime,
      `const forIn = []; for (const key in moss) forIn.push(key);
       return {
         keys: Object.keys(moss),
         spread: { ...moss },
         json: JSON.stringify(moss),
         has: ["memo" in moss, "other" in moss, "nothing" in moss],
         forIn,
         descriptor: Object.getOwnPropertyDescriptor(moss, "memo"),
         own: Object.hasOwn(moss, "memo"),
         prototype: Object.getPrototypeOf(moss) === Object.prototype,
       };`,
    );
    expect(seen.returns).toEqual({
      keys: ["memo", "other"],
      spread: { memo: [1, 2, 3], other: "kept" },
      json: '{"memo":[1,2,3],"other":"kept"}',
      has: [true, true, false],
      forIn: ["memo", "other"],
      descriptor: { value: [1, 2, 3], writable: true, enumerable: true, configurable: true },
      own: true,
      prototype: true,
    });
  });

  test("delete removes the field as from a plain object", async () => {
    const runtime = await untouchedSession(sandbox);
    const seen = await run(
      runtime,
      `const plain = { memo: 1, other: 2 };
       return [delete moss.memo, "memo" in moss, moss.memo, Object.keys(moss), delete plain.memo, Object.keys(plain)];`,
    );
    expect(seen.returns).toEqual([true, false, undefined, ["other"], true, ["other"]]);
    const after = await run(runtime, `return ["memo" in moss, moss.other];`);
    expect(after.returns).toEqual([false, "kept"]);
  });

  test("a frozen moss refuses assignment as a frozen plain object does, and its fields keep their values", async () => {
    const runtime = await untouchedSession(sandbox);
    const seen = await run(
      runtime,
      `const attempt = (target) => {
         try { target.memo = "changed"; return ["no error", target.memo]; }
         catch (error) { return [error.constructor.name, target.memo]; }
       };
       const plain = Object.freeze({ memo: [1, 2, 3] });
       Object.freeze(moss);
       return [Object.isFrozen(moss), attempt(moss), attempt(plain),
               Object.getOwnPropertyDescriptor(moss, "memo").writable, Reflect.set(moss, "memo", 1)];`,
    );
    const [frozen, onMoss, onPlain, writable, set] = seen.returns as unknown[];
    expect(frozen).toBe(true);
    expect(onMoss).toEqual(onPlain);
    expect((onMoss as unknown[])[1]).toEqual([1, 2, 3]);
    expect(writable).toBe(false);
    expect(set).toBe(false);
    const later = await run(runtime, `return [Object.isFrozen(moss), moss.memo];`);
    expect(later.returns).toEqual([true, [1, 2, 3]]);
    for (const fields of await stored(sandbox, runtime)) expect(fields).toEqual([[1, 2, 3], "kept"]);
  });

  test("a long field of multi-byte text crosses whole: sent, stored, installed again and returned", async () => {
    // Longer than FRAME_MIN_CHARS: in a sandbox process it crosses the control pipe as raw frames both ways.
    const runtime = await compile(sandbox);
    const made = `Array.from({ length: 3000 }, (_, i) => ({ i, text: "é \\"q\\" \\\\ 😀 " + i }))`;
    const first = await run(runtime, `moss.memo = ${made}; return moss.memo;`);
    const expected = Array.from({ length: 3000 }, (_, i) => ({ i, text: `é "q" \\ 😀 ${i}` }));
    expect(first.returns).toEqual(expected);
    for (const fields of await stored(sandbox, runtime)) expect(fields).toEqual([expected, null]);
  });

  test("a field read and left unchanged keeps its stored value", async () => {
    const runtime = await untouchedSession(sandbox);
    const seen = await run(runtime, "return moss.memo.length;");
    expect(seen.returns).toBe(3);
    await run(runtime, "return 4;");
    for (const fields of await stored(sandbox, runtime)) expect(fields).toEqual([[1, 2, 3], "kept"]);
  });
});
