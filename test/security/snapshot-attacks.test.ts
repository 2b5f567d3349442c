import { afterAll, afterEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { decodeProperties } from "../../engine/context/index.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { InProcessDriver } from "../../engine/sandbox/in-process-driver.ts";
import { ProcessDriver } from "../../engine/sandbox/process-driver.ts";
import type { SandboxDriver } from "../../engine/sandbox/sandbox.ts";
import type { ExecutionLimits } from "../../engine/types.ts";
import { Vault } from "../fixtures/security/vault.ts";
import { expectOk } from "../helpers/expect-ok.ts";
import { SECURITY_MODULE } from "./security-harness.ts";

/*
 * Issue 24 §6: what is saved is what the session holds. Model code that runs while the data fields are snapshotted
 * (a Proxy trap, a getter) could change a field already taken: the isolate would hold one value and the saved
 * context another. The snapshot runs no model code: a field reaching a Proxy model code made, or a getter, is refused
 * by name and set back to its saved value, so after every run the saved context equals what the session holds.
 */

const LIMITS: ExecutionLimits = {
  wallTimeMs: 5_000,
  cpuTimeMs: 5_000,
  memoryLimitBytes: 64 * 1024 * 1024,
  maxStdoutBytes: 4_096,
  maxHostCalls: 10_000,
  maxResultBytes: 64 * 1024,
};

/** The data fields as the saved context holds them. */
function saved(runtime: MossRuntime): Record<string, unknown> {
  return decodeProperties(runtime.dumpContext().properties, { maxBytes: LIMITS.maxResultBytes });
}

/** The data fields as the session's isolate holds them (read by a run that changes nothing). */
async function held(runtime: MossRuntime): Promise<Record<string, unknown>> {
  const read = await runtime.execute({
    code: "function main(moss) { return { notes: JSON.stringify(moss.notes), stash: JSON.stringify(moss.stash ?? null), counter: moss.counter }; }",
    typeCheck: "off",
  });
  expectOk(read);
  const values = read.returns as { notes: string; stash: string; counter: number };
  return { notes: JSON.parse(values.notes), stash: JSON.parse(values.stash), counter: values.counter };
}

const ATTACKS: Array<{ name: string; code: string; field: string }> = [
  {
    name: "a Proxy trap in a later field pushes to an earlier one",
    field: "stash",
    code: `function main(moss) {
      moss.notes = ["1", "2", "3"];
      moss.stash = new Proxy([0], { get(target, key) { if (key === "0") moss.notes.push("2"); return Reflect.get(target, key); } });
    }`,
  },
  {
    name: "a Proxy made with Proxy.revocable",
    field: "stash",
    code: `function main(moss) {
      moss.notes = ["1", "2", "3"];
      moss.stash = { inner: Proxy.revocable({}, { ownKeys() { moss.notes.push("2"); return []; } }).proxy };
    }`,
  },
  {
    name: "a getter in a later field",
    field: "stash",
    code: `function main(moss) {
      moss.notes = ["1", "2", "3"];
      moss.stash = { get x() { moss.notes.push("2"); return 1; } };
    }`,
  },
  {
    name: "a getter on an array element",
    field: "stash",
    code: `function main(moss) {
      moss.notes = ["1", "2", "3"];
      const list = [1];
      Object.defineProperty(list, 0, { get() { moss.notes.push("2"); return 1; }, enumerable: true });
      moss.stash = list;
    }`,
  },
  {
    name: "a getter defined on moss itself",
    field: "stash",
    code: `function main(moss) {
      moss.notes = ["1", "2", "3"];
      Object.defineProperty(moss, "stash", { get() { moss.notes.push("2"); return 1; }, enumerable: true, configurable: true });
    }`,
  },
  {
    name: "a getter in the return value",
    field: "returns",
    code: `function main(moss) {
      moss.notes = ["1", "2", "3"];
      return { get x() { moss.notes.push("2"); return 1; } };
    }`,
  },
  {
    name: "a Proxy in the return value",
    field: "returns",
    code: `function main(moss) {
      moss.notes = ["1", "2", "3"];
      return new Proxy({}, { ownKeys() { moss.notes.push("2"); return []; } });
    }`,
  },
];

describe.each([
  ["process", () => new ProcessDriver({ poolSize: 1, maxProcesses: 1, sessionsPerProcess: 8 })],
  ["in-process", () => new InProcessDriver({ maxSessions: 8 })],
] as const)("the data snapshot runs no model code (%s driver)", (_name, createDriver) => {
  const driver: SandboxDriver = createDriver();
  const runtimes: MossRuntime[] = [];

  async function compile(): Promise<MossRuntime> {
    const runtime = await new MossCompiler({ sandbox: driver, limits: LIMITS })
      .bind(Vault, new Vault())
      .compile(SECURITY_MODULE);
    runtimes.push(runtime);
    return runtime;
  }

  afterEach(async () => {
    await Promise.all(runtimes.splice(0).map((runtime) => runtime.close()));
  });
  afterAll(async () => {
    await driver.close();
  });

  test.each(ATTACKS)("$name: the saved context equals what the session holds", async (attack) => {
    const runtime = await compile();
    const execution = await runtime.execute({ code: attack.code, typeCheck: "off" });
    if (attack.field !== "returns") {
      // The field that would run code is named; the run itself is not failed for it.
      expect(execution.warnings.join("\n")).toMatch(
        new RegExp(`moss\\.${attack.field} .*(getter|Proxy).*not persisted`),
      );
    }
    const inContext = saved(runtime);
    const inIsolate = await held(runtime);
    expect(inIsolate.notes).toEqual(inContext.notes ?? []);
    expect(inIsolate.counter).toEqual(inContext.counter ?? 0);
    // No trap or getter ran while the data were taken: the earlier field is as the run left it.
    expect(inIsolate.notes).toEqual(["1", "2", "3"]);
  });

  test("a hole is saved as undefined without reading a getter planted on Array.prototype", async () => {
    const runtime = await compile();
    const execution = await runtime.execute({
      code: `function main(moss) {
        moss.counter = 1;
        Object.defineProperty(Array.prototype, 1, { get() { moss.counter = 2; return "x"; }, configurable: true });
        moss.stash = ["a", , "c"];
      }`,
      typeCheck: "off",
    });
    expectOk(execution);
    const data = saved(runtime) as { stash: unknown[]; counter: number };
    expect(data.stash).toEqual(["a", undefined, "c"]);
    expect(data.counter).toBe(1);
  });

  test("plain data, holes, regular expressions and errors are still saved as before", async () => {
    const runtime = await compile();
    expectOk(
      await runtime.execute({
        code: `function main(moss) {
          moss.stash = { holes: ["a", , "c"], when: new Date(0), pattern: /a.b/gi, error: new TypeError("bad"), map: new Map([[1, "one"]]) };
        }`,
        typeCheck: "off",
      }),
    );
    const data = saved(runtime) as { stash: Record<string, unknown> };
    // (A hole is kept in a field whose declared type admits undefined: \`notes\` is string[], where the write rule refuses it.)
    expect(data.stash.holes).toEqual(["a", undefined, "c"]);
    expect(data.stash.pattern).toEqual(/a.b/gi);
    expect((data.stash.error as Error).name).toBe("TypeError");
    expect((data.stash.error as Error).message).toBe("bad");
    expect(data.stash.map).toEqual(new Map([[1, "one"]]));
  });
});
