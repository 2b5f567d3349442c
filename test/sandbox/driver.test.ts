import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { decodeWire, encodeWire } from "../../engine/membrane/host/host-wire.ts";
import { InProcessDriver } from "../../engine/sandbox/in-process-driver.ts";
import { ProcessDriver } from "../../engine/sandbox/process-driver.ts";
import type { SandboxDriver, SandboxRunRequest } from "../../engine/sandbox/sandbox.ts";
import { DEFAULT_LIMITS, type ExecutionLimits } from "../../engine/types.ts";
import { Ball, TestMembrane } from "./test-membrane.ts";

const drivers: Array<[string, () => SandboxDriver]> = [
  ["in-process", () => new InProcessDriver()],
  ["process", () => new ProcessDriver({ poolSize: 1 })],
];

const LIMITS: ExecutionLimits = {
  ...DEFAULT_LIMITS,
  wallTimeMs: 2_000,
  cpuTimeMs: 2_000,
  memoryLimitBytes: 64 * 1024 * 1024,
};

describe.each(drivers)("%s driver", (_name, createDriver) => {
  let driver: SandboxDriver;
  beforeAll(() => {
    driver = createDriver();
  });
  afterAll(async () => {
    await driver.close();
  });

  async function open(options: { data?: Record<string, unknown>; limits?: Partial<ExecutionLimits> } = {}) {
    const membrane = new TestMembrane();
    const ball = new Ball("main");
    const setup = membrane.setup(
      { Ball, ball, double: (value: number) => value * 2, answer: 42 },
      options.data ?? { count: 0, notes: ["first"] },
      { ball, missing: undefined },
    );
    const session = await driver.open(setup, membrane, { ...LIMITS, ...options.limits });
    const run = (script: string, extra: Partial<SandboxRunRequest> = {}) =>
      session.run({
        script,
        filename: "snippet.js",
        target: "main",
        args: [{ local: "moss" }],
        limits: LIMITS,
        ...extra,
      });
    return { session, membrane, ball, run };
  }

  const value = (text: string | undefined) => (text === undefined ? undefined : decodeWire(text));

  test("calls sync and async host methods through moss services and module globals", async () => {
    const { session, run, ball } = await open();
    const result = await run(`async function main(moss) {
      const moved = moss.ball.move(1, 2);
      const rolled = ball.roll(5);
      const isPromise = rolled instanceof Promise;
      return { moved, rolled: await rolled, isPromise, doubled: double(4), answer, label: ball.label };
    }`);
    expect(result.error).toBeUndefined();
    expect(result.ok).toBe(true);
    expect(value(result.returns)).toEqual({
      moved: { x: 1, y: 2 },
      rolled: 10,
      isPromise: true,
      doubled: 8,
      answer: 42,
      label: "main",
    });
    expect(ball.position).toEqual({ x: 1, y: 2 });
    expect(result.hostCalls).toBe(4);
    await session.dispose();
  });

  test("host errors arrive as catchable isolate errors with name and message only", async () => {
    const { session, run } = await open();
    const result = await run(`async function main() {
      const out = [];
      try { ball.fail(); } catch (error) { out.push([error instanceof TypeError, error.name, error.message, error.stack.includes("test-membrane")]); }
      try { await ball.failLater(); } catch (error) { out.push([error instanceof RangeError, error.name, error.message, error.stack.includes("test-membrane")]); }
      return out;
    }`);
    expect(value(result.returns)).toEqual([
      [true, "TypeError", "cannot fail at /home/secret/ball.ts:12", false],
      [true, "RangeError", "rolled off the table", false],
    ]);
    const uncaught = await run(`async function main() {\n  await ball.failLater();\n}`);
    expect(uncaught.error).toMatchObject({
      kind: "runtime",
      name: "RangeError",
      message: "rolled off the table",
    });
    expect(uncaught.error?.stack).toContain("snippet.js:2");
    expect(uncaught.error?.stack).not.toContain("bootstrap");
    await session.dispose();
  });

  test("host objects returned by the host become proxies; classes construct with new", async () => {
    const { session, run } = await open();
    const result = await run(`function main() {
      const spawned = ball.spawn("child");
      const built = new Ball("built");
      let plainCall;
      try { Ball("x"); } catch (error) { plainCall = error.name; }
      return { spawned: spawned.label, moved: spawned.move(3, 4), built: built.label, plainCall, same: ball.spawn === ball.spawn };
    }`);
    expect(value(result.returns)).toEqual({
      spawned: "child",
      moved: { x: 3, y: 4 },
      built: "built",
      plainCall: "TypeError",
      same: true,
    });
    const back = await run("function main() { return ball.echo(ball) === ball }");
    expect(value(back.returns)).toBe(true);
    await session.dispose();
  });

  test("proxies are frozen and expose only the shape's public members", async () => {
    const { session, run } = await open();
    const result = await run(`function main(moss) {
      const probe = (target) => [target.constructor, target.__proto__, target.prototype, target._secret, target._hiddenMethod, Object.isFrozen(target)];
      const before = moss.ball;
      try { moss.ball = 1; } catch {}
      try { delete moss.ball; } catch {}
      const replaced = moss.ball === before;
      try { ball.extra = 1; ball.move = null; } catch {}
      const added = "extra" in ball || typeof ball.move !== "function";
      return { ball: probe(ball), Ball: probe(Ball), method: ball.move.constructor, keys: Object.keys(ball).sort(), replaced, added, missing: moss.missing };
    }`);
    const returned = value(result.returns) as Record<string, unknown>;
    expect(returned.ball).toEqual([undefined, undefined, undefined, undefined, undefined, true]);
    expect(returned.Ball).toEqual([undefined, undefined, undefined, undefined, undefined, true]);
    expect(returned.method).toBeUndefined();
    expect(returned.keys).toEqual([
      "echo",
      "fail",
      "failLater",
      "label",
      "move",
      "never",
      "ping",
      "position",
      "roll",
      "spawn",
    ]);
    expect(returned.replaced).toBe(true);
    expect(returned.added).toBe(false);
    expect(returned.missing).toBeUndefined();
    await session.dispose();
  });

  test("Date, Map, Set and bigint cross in both directions", async () => {
    const { session, run } = await open();
    const argument = {
      when: new Date("2020-01-02T03:04:05Z"),
      tags: new Set(["a"]),
      index: new Map([["k", 10n]]),
    };
    const result = await run(
      `function main(moss, input) {
        const echoed = ball.echo(input);
        return { sameShape: echoed.when instanceof Date && echoed.tags instanceof Set && echoed.index instanceof Map,
          year: input.when.getUTCFullYear(), big: input.index.get("k") * 2n, echoed };
      }`,
      { args: [{ local: "moss" }, { wire: encodeWire(argument) }] },
    );
    expect(result.error).toBeUndefined();
    expect(value(result.returns)).toEqual({ sameShape: true, year: 2020, big: 20n, echoed: argument });
    await session.dispose();
  });

  test("data fields are mutated in place and snapshotted; non-persistable values are reported", async () => {
    const { session, run } = await open({ data: { count: 1, notes: ["first"], when: new Date(0) } });
    const result = await run(`function main(moss) {
      moss.count += 1;
      moss.notes.push("second");
      moss.when = new Date(1000);
      moss.callback = () => 1;
    }`);
    expect(result.ok).toBe(true);
    expect(value(result.mossData)).toEqual({ count: 2, notes: ["first", "second"], when: new Date(1000) });
    const fieldWithFunction = await run(
      "function main(moss) { moss.notes.push(() => 1); moss.count = ball; }",
    );
    expect(fieldWithFunction.warnings).toEqual([
      "moss.count is a host object and was not persisted",
      "moss.notes[2] is a function and was not persisted",
    ]);
    await session.dispose();
  });

  test("the snapshot is taken even when the run fails", async () => {
    const { session, run } = await open();
    const result = await run(`function main(moss) { moss.count = 7; throw new Error("boom"); }`);
    expect(result.ok).toBe(false);
    expect(result.error).toMatchObject({ kind: "runtime", name: "Error", message: "boom" });
    expect(value(result.mossData)).toMatchObject({ count: 7 });
    await session.dispose();
  });

  test("definitions persist between runs of one session", async () => {
    const { session, run } = await open();
    await run("var total = 40; function helper(x) { return x + 1; } function main() {}");
    const result = await run("function main() { return helper(total) + 1; }");
    expect(value(result.returns)).toBe(42);
    await session.dispose();
  });

  test("a missing or non-callable target is a runtime error", async () => {
    const { session, run } = await open();
    const missing = await run("var x = 1;", { target: "nothere" });
    expect(missing.error).toMatchObject({ kind: "runtime", name: "ReferenceError" });
    expect(missing.error?.message).toMatch(/^nothere is not defined/);
    const notCallable = await run("var notFn = 3;", { target: "notFn" });
    expect(notCallable.error).toMatchObject({ kind: "runtime", name: "TypeError" });
    await session.dispose();
  });

  test("syntax and top-level errors carry snippet-only stacks", async () => {
    const { session, run } = await open();
    const syntax = await run("function main() {\n  return 1 +;\n}");
    expect(syntax.error).toMatchObject({ kind: "syntax", name: "SyntaxError" });
    expect(syntax.error?.stack).toContain("snippet.js:2");
    const thrown = await run("function helper() {\n  null.x;\n}\nhelper();");
    expect(thrown.error).toMatchObject({ kind: "runtime", name: "TypeError" });
    expect(thrown.error?.stack).toMatch(/at helper \(snippet\.js:2:\d+\)/);
    expect(thrown.error?.stack).not.toMatch(/isolated-vm|\.ts:/);
    const primitive = await run("function main() { throw 'plain'; }");
    expect(primitive.error).toMatchObject({ kind: "runtime", message: "Uncaught plain" });
    expect(session.alive).toBe(true);
    await session.dispose();
  });

  test("console output is captured in order and formatted", async () => {
    const { session, run } = await open();
    const result = await run(`function main(moss) {
      console.log("text", 1, { a: [1, "two"], m: new Map([["k", 1]]) }, new Set([1]), -0, 2n, undefined, null);
      console.info("%s has %d items", "list", 3);
      console.warn(ball);
      console.error(new TypeError("shown"));
      moss.pprint({ nested: { deep: { list: [1, 2, 3] } } });
    }`);
    const lines = result.stdout.split("\n");
    expect(lines[0]).toBe(
      "text 1 { a: [ 1, 'two' ], m: Map(1) { 'k' => 1 } } Set(1) { 1 } -0 2n undefined null",
    );
    expect(lines[1]).toBe("list has 3 items");
    expect(lines[2]).toBe("[host object]");
    expect(lines[3]).toBe("TypeError: shown");
    expect(lines.slice(4).join("\n")).toMatch(
      /^(\s+at .*\n)*\{ nested: \{ deep: \{ list: \[ 1, 2, 3 \] \} \} \}\n$/,
    );
    await session.dispose();
  });

  test("output limit: a marker line is appended and the run ends with output-limit", async () => {
    const { session, run } = await open();
    const result = await run(
      `function main() { for (let i = 0; ; i++) { try { console.log("line " + i); } catch { return "caught"; } } }`,
      {
        limits: { ...LIMITS, maxStdoutBytes: 100 },
      },
    );
    expect(result.ok).toBe(false);
    expect(result.error?.kind).toBe("output-limit");
    expect(result.stdout.endsWith("… [stdout truncated: limit of 100 bytes reached]\n")).toBe(true);
    expect(result.stdout.startsWith("line 0\nline 1\n")).toBe(true);
    expect(Buffer.byteLength(result.stdout.slice(0, result.stdout.indexOf("…")))).toBeLessThanOrEqual(101);
    expect(session.alive).toBe(true);
    await session.dispose();
  });

  test("call limit: beyond maxHostCalls the run ends with call-limit", async () => {
    const { session, run, ball } = await open();
    const result = await run(
      `function main() { for (let i = 0; i < 100; i++) { try { ball.move(1, 0); } catch { } } return "done"; }`,
      {
        limits: { ...LIMITS, maxHostCalls: 5 },
      },
    );
    expect(result.ok).toBe(false);
    expect(result.error?.kind).toBe("call-limit");
    expect(ball.position.x).toBe(5);
    expect(result.hostCalls).toBe(5);
    await session.dispose();
  });

  test("result bytes: an oversized return value ends with output-limit", async () => {
    const { session, run } = await open();
    const result = await run(`function main() { return "x".repeat(5000); }`, {
      limits: { ...LIMITS, maxResultBytes: 1000 },
    });
    expect(result.ok).toBe(false);
    expect(result.error?.kind).toBe("output-limit");
    expect(result.returns).toBeUndefined();
    expect(value(result.mossData)).toEqual({ count: 0, notes: ["first"] });
    await session.dispose();
  });

  test("timeout: an infinite loop is stopped and the session dies", async () => {
    const { session, run } = await open();
    const result = await run("function main() { console.log('before'); while (true) {} }", {
      limits: { ...LIMITS, wallTimeMs: 300, cpuTimeMs: 300 },
    });
    expect(result.error?.kind).toBe("timeout");
    expect(result.stdout).toBe("before\n");
    expect(session.alive).toBe(false);
    const after = await run("function main() { return 1; }");
    expect(after.ok).toBe(false);
    await session.dispose();
  });

  test("timeout: awaiting a never-settling host promise is stopped by the wall clock", async () => {
    const { session, run } = await open();
    const result = await run("async function main() { await ball.never(); }", {
      limits: { ...LIMITS, wallTimeMs: 300 },
    });
    expect(result.error?.kind).toBe("timeout");
    expect(result.error?.message).toMatch(/wall-time/);
    expect(session.alive).toBe(false);
    await session.dispose();
  });

  test("memory: exceeding the isolate memory limit ends with kind memory", async () => {
    const { session, run } = await open({ limits: { memoryLimitBytes: 16 * 1024 * 1024 } });
    const result = await run(
      "function main() { const keep = []; while (true) keep.push(new Array(100000).fill(1)); }",
      {
        limits: { ...LIMITS, memoryLimitBytes: 16 * 1024 * 1024, wallTimeMs: 10_000, cpuTimeMs: 10_000 },
      },
    );
    expect(result.error?.kind).toBe("memory");
    expect(session.alive).toBe(false);
    await session.dispose();
  });

  test("the host event loop keeps ticking while model code spins", async () => {
    const { session, run } = await open();
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    const result = await run("function main() { while (true) {} }", {
      limits: { ...LIMITS, wallTimeMs: 500, cpuTimeMs: 500 },
    });
    clearInterval(timer);
    expect(result.error?.kind).toBe("timeout");
    expect(ticks).toBeGreaterThan(5);
    await session.dispose();
  });

  test("obvious escapes are closed", async () => {
    const { session, run } = await open();
    const result = await run(`function main(moss) {
      const attempts = {};
      const attempt = (name, action) => { try { attempts[name] = String(action()); } catch (error) { attempts[name] = "blocked: " + error.name; } };
      attempt("methodConstructor", () => ball.move.constructor.constructor("return typeof process")());
      attempt("viaProxyThis", () => this.constructor.constructor("return typeof process")());
      attempt("functionProxy", () => double.constructor);
      attempt("prototypeWalk", () => Object.getPrototypeOf(ball));
      attempt("descriptorGetter", () => Object.getPrototypeOf(Object.getOwnPropertyDescriptor(ball, "label").get));
      attempt("globals", () => Object.getOwnPropertyNames(globalThis).filter((name) => /ivm|bridge|\\$|emit|hostCall|isolated/i.test(name)).join(","));
      attempt("caller", () => String(main.caller));
      attempt("wasm", () => typeof WebAssembly + typeof SharedArrayBuffer + typeof Atomics);
      attempt("require", () => typeof require + typeof process);
      Error.prepareStackTrace = (error, frames) => frames.map((frame) => typeof frame.getFunction()).join(",");
      attempt("prepareStackTrace", () => { try { ball.fail(); } catch (error) { return error.stack; } });
      return attempts;
    }`);
    const attempts = value(result.returns) as Record<string, string>;
    expect(attempts.methodConstructor).toMatch(/^blocked/);
    expect(attempts.viaProxyThis).toBe("undefined");
    expect(attempts.functionProxy).toBe("undefined");
    expect(attempts.prototypeWalk).toBe("null");
    expect(attempts.descriptorGetter).toBe("null");
    expect(attempts.globals).toBe("");
    expect(attempts.caller).toBe("null");
    expect(attempts.wasm).toBe("undefinedundefinedundefined");
    expect(attempts.require).toBe("undefinedundefined");
    expect(attempts.prepareStackTrace).not.toContain("function");
    await session.dispose();
  });

  test("dispose is idempotent", async () => {
    const { session } = await open();
    await session.dispose();
    await session.dispose();
    expect(session.alive).toBe(false);
  });
});
