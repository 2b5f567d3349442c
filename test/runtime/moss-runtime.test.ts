import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { decodeProperties } from "../../engine/context/index.ts";
import { MOSS_DIAGNOSTIC_CODES } from "../../engine/diagnostic-codes.ts";
import { MossError } from "../../engine/errors.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { crashResult } from "../../engine/sandbox/crash-result.ts";
import type { SandboxDriver } from "../../engine/sandbox/sandbox.ts";
import { writeModule } from "../helpers/compile-from-text.ts";

const MODULE = `import { Moss as Parent } from "moss-ts";

/** A counter the model drives. */
export abstract class Counter {
  abstract add(n: number): number;
  abstract addLater(n: number): Promise<number>;
  abstract fail(message: string): never;
  abstract total(): number;
}

export class Moss extends Parent {
  counter!: Counter;
  notes: string[] = [];
  seen: Date | null = null;
  tags = new Set<string>();
  memo: unknown = null;
}

export function double(n: number): number {
  return n * 2;
}

// <moss-hide>
export class HostCounter extends Counter {
  value = 0;
  calls: string[] = [];
  injectedAs: string | undefined;
  destroyed = 0;
  add(n: number) { this.calls.push("add"); return (this.value += n); }
  async addLater(n: number) { await new Promise((resolve) => setTimeout(resolve, 5)); return this.add(n); }
  fail(message: string): never { throw new RangeError(message + " in /srv/secret/path/counter.ts"); }
  total() { return this.value; }
  onInject(_runtime: unknown, field: string) { this.injectedAs = field; }
  onDestroy() { this.destroyed++; }
}
export function __moss_compile__(compiler: { bind(token: unknown, value: unknown): unknown }) {
  compiler.bind(Counter, new HostCounter());
}
// </moss-hide>
`;

let modulePath: string;
const open: MossRuntime[] = [];

beforeAll(async () => {
  modulePath = await writeModule(MODULE, "runtime");
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((runtime) => runtime.close()));
});
afterAll(async () => {
  await closeSharedSandboxes();
});

async function compile(
  options: ConstructorParameters<typeof MossCompiler>[0] = {},
  configure?: (compiler: MossCompiler) => void,
) {
  const compiler = new MossCompiler({ sandbox: "in-process", ...options });
  configure?.(compiler);
  const runtime = await compiler.compile(modulePath);
  open.push(runtime);
  return runtime;
}

type HostCounter = { value: number; calls: string[]; injectedAs?: string; destroyed: number };
const counterOf = (runtime: MossRuntime) => runtime.mossInjections().counter as HostCounter;

describe.each(["in-process", "process"] as const)("MossRuntime.execute (%s sandbox)", (sandbox) => {
  test("runs main(moss) with services reached through the membrane, sync and async, and returns a copy", async () => {
    const runtime = await compile({ sandbox });
    const execution = await runtime.execute({
      code: "```typescript\nasync function main(moss: Moss) {\n  moss.counter.add(2);\n  const later = await moss.counter.addLater(3);\n  return { later, total: moss.counter.total(), doubled: double(later), at: new Date(7) };\n}\n```",
    });
    expect(execution.error).toBeUndefined();
    expect(execution.ok).toBe(true);
    expect(execution.returns).toEqual({ later: 5, total: 5, doubled: 10, at: new Date(7) });
    expect(counterOf(runtime).value).toBe(5);
  });

  test("data fields live in the isolate (in-place mutation works) and persist into the context", async () => {
    const runtime = await compile({ sandbox });
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) { moss.notes.push("first"); moss.tags.add("a"); moss.seen = new Date(42); }`,
    });
    expect(execution.ok).toBe(true);
    const properties = decodeProperties(execution.context.properties);
    expect(properties).toMatchObject({ notes: ["first"], seen: new Date(42), tags: new Set(["a"]) });
    const next = await runtime.execute({ code: `function main(moss: Moss) { return moss.notes.length; }` });
    expect(next.returns).toBe(1);
  });

  test("a runtime error reports kind, message, snippet line/column and only snippet frames", async () => {
    const runtime = await compile({ sandbox });
    const execution = await runtime.execute({
      code: `function helper(): never {\n  throw new TypeError("bad input");\n}\nasync function main(moss: Moss) {\n  helper();\n}`,
    });
    expect(execution.ok).toBe(false);
    expect(execution.error).toMatchObject({
      kind: "runtime",
      name: "TypeError",
      message: "bad input",
      line: 2,
      column: 9,
    });
    expect(execution.error?.stack).toContain("snippet.ts:2:9");
    expect(execution.error?.stack).toContain("snippet.ts:5:3");
    expect(execution.error?.stack).not.toMatch(/bootstrap|node_modules|\/work\//);
    expect(execution.error?.frame).toContain('throw new TypeError("bad input")');
  });

  test("host errors arrive as catchable Errors with name and message and no host paths", async () => {
    const runtime = await compile({ sandbox });
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {\n  try { moss.counter.fail("nope"); } catch (error) { return [(error as Error).name, (error as Error).message, error instanceof Error]; }\n}`,
    });
    expect(execution.returns).toEqual(["RangeError", "nope in <host path>/counter.ts", true]);
  });

  test("an infinite loop ends with kind timeout, and the runtime continues from its last persisted context", async () => {
    const runtime = await compile({ sandbox });
    await runtime.execute({ code: `function main(moss: Moss) { moss.notes.push("kept"); }` });
    const stuck = await runtime.execute({
      code: `function main(moss: Moss) { moss.notes.push("lost?"); while (true) {} }`,
      limits: { wallTimeMs: 500, cpuTimeMs: 400 },
    });
    expect(stuck.ok).toBe(false);
    expect(stuck.error?.kind).toBe("timeout");
    const after = await runtime.execute({ code: `function main(moss: Moss) { return moss.notes; }` });
    expect(after.ok).toBe(true);
    expect(after.returns).toEqual(["kept"]);
  });
});

describe("MossRuntime.execute: the context records the code it runs (GhostOS parity)", () => {
  test("executeCode is the snippet; executed is false during the run, true once it returned normally", async () => {
    let runtime: MossRuntime | undefined;
    const seen: Array<{ executeCode?: string; executed: boolean }> = [];
    runtime = await compile({}, (compiler) => {
      compiler.withLocals({
        peek: () => {
          const context = runtime!.dumpContext();
          seen.push({ executeCode: context.executeCode, executed: context.executed });
          return 1;
        },
      });
    });
    const code = "function main(moss: Moss) { return peek(); }";
    const execution = await runtime.execute({ code: `\`\`\`ts\n${code}\n\`\`\`` });
    expect(execution.ok).toBe(true);
    expect(seen).toEqual([{ executeCode: code, executed: false }]);
    expect(execution.context).toMatchObject({ executeCode: code, executed: true });
    expect(runtime.dumpContext()).toMatchObject({ executeCode: code, executed: true });
  });

  test("a sandbox crash message (the sandbox process's stderr) reaches the model without host paths", async () => {
    const crashing: SandboxDriver = {
      name: "process",
      async open() {
        return {
          alive: true,
          run: async () =>
            crashResult(
              "the sandbox process was killed by SIGABRT (# Fatal error in /srv/données privées/node_modules/isolated-vm/out/isolated_vm.node); it is being replaced",
              "SandboxCrash",
            ),
          dispose: async () => {},
        };
      },
      close: async () => {},
    };
    const runtime = await compile({ sandbox: crashing });
    const execution = await runtime.execute({ code: "function main(moss: Moss) { return 1; }" });
    expect(execution.error?.kind).toBe("crash");
    expect(execution.error?.message).toContain("<host path>/isolated_vm.node");
    expect(execution.error?.message).not.toMatch(/données|node_modules|\/srv/);
  });

  test("a visible abstract class cannot be constructed from model code (its declaration forbids it)", async () => {
    const runtime = await compile();
    const execution = await runtime.execute({
      code: "function main(moss: Moss) { try { new (Counter as any)(); return 'constructed'; } catch (error) { return (error as Error).name; } }",
      typeCheck: "off",
    });
    expect(execution.returns).not.toBe("constructed");
  });

  test("a failed run leaves executed false with its code recorded; the next good run sets it again", async () => {
    const runtime = await compile();
    const failing = "function main(moss: Moss) { throw new Error('no'); }";
    const failed = await runtime.execute({ code: failing });
    expect(failed.ok).toBe(false);
    expect(runtime.dumpContext()).toMatchObject({ executeCode: failing, executed: false });
    const typeError = "function main(moss: Moss) { const n: number = 'x'; return n; }";
    await runtime.execute({ code: typeError });
    expect(runtime.dumpContext()).toMatchObject({ executeCode: typeError, executed: false });
    const good = "function main(moss: Moss) { return 2; }";
    await runtime.execute({ code: good });
    expect(runtime.dumpContext()).toMatchObject({ executeCode: good, executed: true });
  });

  test("the recorded fields survive a saved context joined into a new compiler", async () => {
    const first = await compile();
    await first.execute({ code: "function main(moss: Moss) { moss.notes.push('a'); }" });
    const saved = first.dumpContext();
    const second = await compile({}, (compiler) => compiler.joinContext(saved));
    expect(second.dumpContext()).toMatchObject({
      executeCode: "function main(moss: Moss) { moss.notes.push('a'); }",
      executed: true,
    });
  });
});

describe("MossRuntime.execute: the contract", () => {
  test("target, args and localArgs: a named target gets moss then copied args; a bare target gets nothing", async () => {
    const runtime = await compile();
    const withArgs = await runtime.execute({
      code: `function greet(moss: Moss, name: string, times: number) { return name.repeat(times) + moss.notes.length; }`,
      target: "greet",
      args: ["ab", 2],
    });
    expect(withArgs.returns).toBe("abab0");
    const bare = await runtime.execute({ code: `function main() { return arguments.length; }` });
    expect(bare.returns).toBe(0);
    const explicit = await runtime.execute({
      code: `function main(...all: unknown[]) { return all.length; }`,
      localArgs: [],
      args: [1, 2, 3],
    });
    expect(explicit.returns).toBe(3);
  });

  test("withLocals names are in scope for the sandbox and for the strict type-check", async () => {
    const runtime = await compile({}, (compiler) => {
      compiler.withLocals({ greet: (name: string) => `hi ${name}`, LIMIT: 3 });
    });
    const execution = await runtime.execute({ code: `function main() { return greet("ada") + LIMIT; }` });
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toBe("hi ada3");
    const wrong = await runtime.execute({ code: `function main() { const n: string = LIMIT; return n; }` });
    expect(wrong.error?.kind).toBe("type");
  });

  test("a missing or non-callable target is a clear runtime error", async () => {
    const runtime = await compile();
    const missing = await runtime.execute({ code: `function mian(moss: Moss) {}`, typeCheck: "off" });
    expect(missing.ok).toBe(false);
    expect(missing.error?.kind).toBe("runtime");
    expect(missing.error?.message).toMatch(/main/);
    const notCallable = await runtime.execute({ code: `var main = 42;`, typeCheck: "off" });
    expect(notCallable.error?.kind).toBe("runtime");
    expect(notCallable.error?.message).toMatch(/main/);
  });

  test("definitions persist between executes, for the sandbox and for the type-check", async () => {
    const runtime = await compile();
    const first = await runtime.execute({
      code: `const LIMIT = 3;\nfunction clamp(n: number): number { return Math.min(n, LIMIT); }\nfunction main(moss: Moss) { return clamp(10); }`,
    });
    expect(first.returns).toBe(3);
    const second = await runtime.execute({ code: `function main(moss: Moss) { return clamp(1) + LIMIT; }` });
    expect(second.error).toBeUndefined();
    expect(second.returns).toBe(4);
    const redefined = await runtime.execute({
      code: `const LIMIT = 5;\nfunction main(moss: Moss) { return clamp(10); }`,
    });
    expect(redefined.error).toBeUndefined();
    expect(redefined.returns).toBe(5);
  });

  test("definitions made while type-checking was off are seen by a later strict check", async () => {
    const runtime = await compile();
    const defined = await runtime.execute({
      code: `function twice(n: number): number { return n * 2; }\nfunction main() { return twice(1); }`,
      typeCheck: "off",
    });
    expect(defined.returns).toBe(2);
    const used = await runtime.execute({ code: `function main() { return twice(20) + 1; }` });
    expect(used.error).toBeUndefined();
    expect(used.returns).toBe(41);
    const misused = await runtime.execute({ code: `function main() { return twice("x"); }` });
    expect(misused.error?.kind).toBe("type");
  });

  test("strict type-check stops the run before anything happens; warn runs with warnings; off skips it", async () => {
    const runtime = await compile();
    const code = `function main(moss: Moss) { moss.counter.add(1); moss.notes.push(42); }`;
    const strict = await runtime.execute({ code });
    expect(strict.ok).toBe(false);
    expect(strict.error?.kind).toBe("type");
    expect(strict.error?.diagnostics?.[0]).toMatchObject({ line: 1, severity: "error" });
    expect(counterOf(runtime).calls).toEqual([]);
    const warn = await runtime.execute({ code, typeCheck: "warn" });
    expect(warn.ok).toBe(true);
    expect(warn.warnings.join("\n")).toMatch(/TS2345/);
    expect(counterOf(runtime).calls).toEqual(["add"]);
    const off = await runtime.execute({ code, typeCheck: "off" });
    expect(off.ok).toBe(true);
    // No type-check diagnostics; what the run wrote is still held to the declared types (issue 24 §1: a field that
    // does not fit is refused by name at the end of the run and keeps its last saved value).
    expect(off.warnings).toEqual([
      expect.stringMatching(/^moss\.notes does not fit its declared type .*not persisted/),
    ]);
  });

  test("typecheck(code) returns diagnostics without running", async () => {
    const runtime = await compile();
    const diagnostics = await runtime.typecheck("async function main(moss: Moss) { moss.counter.totl(); }");
    expect(diagnostics[0]).toMatchObject({ code: 2551, line: 1 });
    expect(diagnostics[0]?.message).toContain("Did you mean 'total'?");
    expect(counterOf(runtime).calls).toEqual([]);
  });

  test("syntax errors and imports are reported with kind syntax and a snippet line", async () => {
    const runtime = await compile({ typeCheck: "off" });
    const broken = await runtime.execute({ code: "function main(moss: Moss) {\n  return (1 + ;\n}" });
    expect(broken.error).toMatchObject({ kind: "syntax", line: 2 });
    const imports = await runtime.execute({
      code: `import fs from "node:fs";\nfunction main() { return 1; }`,
    });
    expect(imports.error?.kind).toBe("syntax");
    expect(imports.error?.message).toMatch(/imports are not available/);
  });

  test("with a type-check, its verdict comes before the compiler's: strict refuses code that also cannot compile as a type error", async () => {
    const runtime = await compile();
    const code = `import fs from "node:fs";\nfunction main() { return 1; }`;
    const strict = await runtime.execute({ code });
    expect(strict.error?.kind).toBe("type");
    expect(strict.error?.diagnostics?.[0]).toMatchObject({
      code: MOSS_DIAGNOSTIC_CODES.importStatement,
      line: 1,
    });
    const warned = await runtime.execute({ code: `${code}\n// warn`, typeCheck: "warn" });
    expect(warned.error?.kind).toBe("syntax");
    expect(warned.error?.message).toMatch(/imports are not available/);
  });

  test("stdout is per execution and in order; dumpStdOutput is cumulative; pprint prints", async () => {
    const runtime = await compile();
    const first = await runtime.execute({
      code: `function main(moss: Moss) { console.log("one", 1); console.error("two"); moss.pprint({ a: [1, 2] }); }`,
    });
    expect(first.stdout.split("\n").slice(0, 2)).toEqual(["one 1", "two"]);
    expect(first.stdout).toMatch(/a:\s*\[\s*1,\s*2\s*\]/);
    const second = await runtime.execute({ code: `function main() { console.info("three"); }` });
    expect(second.stdout).toBe("three\n");
    expect(runtime.dumpStdOutput()).toContain("one 1");
    expect(runtime.dumpStdOutput()).toContain("three");
  });

  test("a non-persistable data value is reported by field name and the previous value is kept", async () => {
    const runtime = await compile();
    await runtime.execute({ code: `function main(moss: Moss) { moss.memo = { ok: true }; }` });
    const execution = await runtime.execute({ code: `function main(moss: Moss) { moss.memo = () => 1; }` });
    expect(execution.warnings.join("\n")).toMatch(/memo/);
    expect(decodeProperties(execution.context.properties).memo).toEqual({ ok: true });
  });

  test("a saved context continues in a new runtime (another process would read the same JSON)", async () => {
    const runtime = await compile();
    const execution = await runtime.execute({
      code: `function main(moss: Moss) { moss.notes.push("from turn 1"); moss.seen = new Date(9); }`,
    });
    const saved = JSON.parse(JSON.stringify(execution.context));
    const resumed = await compile({}, (compiler) => void compiler.joinContext(saved));
    const next = await resumed.execute({
      code: `function main(moss: Moss) { return [moss.notes, moss.seen]; }`,
    });
    expect(next.returns).toEqual([["from turn 1"], new Date(9)]);
  });

  test("__moss_exec__ wraps every execute and may call next()", async () => {
    const wrapped = `${MODULE}
export async function __moss_exec__(runtime: unknown, request: { code: string }, next: (request: { code: string }) => Promise<{ returns: unknown }>) {
  const execution = await next({ ...request, code: request.code.replace("41", "42") });
  return { ...execution, returns: ["wrapped", execution.returns] };
}`;
    const file = await writeModule(wrapped, "exec-hook");
    const runtime = await new MossCompiler({ sandbox: "in-process" }).compile(file);
    open.push(runtime);
    const execution = await runtime.execute({ code: `function main() { return 41; }` });
    expect(execution.returns).toEqual(["wrapped", 42]);
  });

  test("services get onInject(runtime, field) before use and onDestroy once; close is idempotent", async () => {
    const runtime = await compile();
    const counter = counterOf(runtime);
    expect(counter.injectedAs).toBe("counter");
    await runtime.close();
    await runtime.close();
    expect(counter.destroyed).toBe(1);
  });

  test("misuse throws MossError: execute after close, and a second concurrent execute", async () => {
    const runtime = await compile();
    const first = runtime.execute({
      code: `async function main(moss: Moss) { await moss.counter.addLater(1); }`,
    });
    await expect(runtime.execute({ code: `function main() {}` })).rejects.toSatisfy((error) =>
      MossError.is(error, "concurrent-execute"),
    );
    expect((await first).ok).toBe(true);
    await runtime.close();
    await expect(runtime.execute({ code: `function main() {}` })).rejects.toSatisfy((error) =>
      MossError.is(error, "runtime-closed"),
    );
  });

  test("model code cannot replace a service: the host and the next execute keep the real one", async () => {
    const runtime = await compile({ typeCheck: "off" });
    const attempt = await runtime.execute({
      code: `function main(moss) { try { moss.counter = { add: () => 999 }; } catch {} return moss.counter.add(1); }`,
    });
    expect(attempt.returns).toBe(1);
    const next = await runtime.execute({ code: `function main(moss) { return moss.counter.add(1); }` });
    expect(next.returns).toBe(2);
    expect(runtime.mossInjections().counter).toBe(counterOf(runtime));
  });

  test("hidden-region names are not reachable from model code", async () => {
    const runtime = await compile({ typeCheck: "off" });
    const execution = await runtime.execute({
      code: `function main() { return [typeof HostCounter, typeof __moss_compile__, typeof double]; }`,
    });
    expect(execution.returns).toEqual(["undefined", "undefined", "function"]);
  });
});
