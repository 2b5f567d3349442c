import { afterAll, afterEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { InProcessDriver } from "../../engine/sandbox/in-process-driver.ts";
import { ProcessDriver } from "../../engine/sandbox/process-driver.ts";
import type { SandboxDriver } from "../../engine/sandbox/sandbox.ts";
import type { ExecutionLimits, MossContext } from "../../engine/types.ts";
import { Vault } from "../fixtures/security/vault.ts";
import { expectOk } from "../helpers/expect-ok.ts";
import { SECURITY_MODULE } from "../security/security-harness.ts";

/*
 * Issue 24 §3: a session keeps its definitions wherever it runs. One record of the session's kept definitions builds
 * both the checker and every new isolate of the session (rebuilt after a timeout, evicted, moved, or made from a
 * saved context), so a strict check never passes for a run that then fails because a definition is gone.
 */

const LIMITS: ExecutionLimits = {
  wallTimeMs: 5_000,
  cpuTimeMs: 5_000,
  memoryLimitBytes: 64 * 1024 * 1024,
  maxStdoutBytes: 4_096,
  maxHostCalls: 10_000,
  maxResultBytes: 64 * 1024,
};

/** Ends the session's isolate: a run past its wall time kills it, and the next run builds a new one. */
async function killIsolate(runtime: MossRuntime): Promise<void> {
  const spun = await runtime.execute({
    code: "function main() { for (;;) {} }",
    typeCheck: "off",
    limits: { ...LIMITS, wallTimeMs: 300, cpuTimeMs: 300 },
  });
  expect(spun.error?.kind).toBe("timeout");
}

/** One kind of top-level definition: what a snippet declares, and a later snippet's use of it. */
interface Kind {
  name: string;
  define: string;
  use: string;
  /** Whether the session keeps it (then the check passes and the rebuilt run returns `returns`). */
  kept: boolean;
  returns?: unknown;
}

const KINDS: Kind[] = [
  {
    name: "function",
    define: "function helper(n: number) { return n + 1; }",
    use: "helper(1)",
    kept: true,
    returns: 2,
  },
  {
    name: "arrow const",
    define: "const helper = (n: number) => n * 3;",
    use: "helper(2)",
    kept: true,
    returns: 6,
  },
  {
    name: "function expression const",
    define: "export const helper = function (n: number) { return n - 1; };",
    use: "helper(5)",
    kept: true,
    returns: 4,
  },
  { name: "literal const", define: "const LIMIT = 42;", use: "LIMIT", kept: true, returns: 42 },
  { name: "string const", define: "const LABEL = 'hi' as const;", use: "LABEL", kept: true, returns: "hi" },
  {
    name: "class",
    define: "class Box { constructor(public value: number) {} twice() { return this.value * 2; } }",
    use: "new Box(4).twice()",
    kept: true,
    returns: 8,
  },
  {
    name: "class extending Error",
    define: "class Oops extends Error { code = 7; }",
    use: "new Oops('x').code",
    kept: true,
    returns: 7,
  },
  {
    name: "enum",
    define: "enum Color { Red = 1, Green = 2 }",
    use: "Color.Green",
    kept: true,
    returns: 2,
  },
  {
    name: "overloaded function",
    define:
      "function pick(x: string): string;\nfunction pick(x: number): number;\nfunction pick(x: any) { return x; }",
    use: "pick(9)",
    kept: true,
    returns: 9,
  },
  {
    name: "interface and type",
    define: "interface Point { x: number } type Pair = [number, number];",
    use: "(({ x: 1 } as Point).x + ([1, 2] as Pair)[1])",
    kept: true,
    returns: 3,
  },
  { name: "let", define: "let counter = 1;", use: "counter", kept: false },
  { name: "var", define: "var counter = 1;", use: "counter", kept: false },
  { name: "object const", define: "const cache = { hits: 1 };", use: "cache.hits", kept: false },
  { name: "array const", define: "const items = [1, 2];", use: "items.length", kept: false },
  { name: "computed const", define: "const started = Date.now();", use: "started", kept: false },
  { name: "destructuring", define: "const { a } = { a: 1 };", use: "a", kept: false },
  {
    name: "function using a let",
    define: "let count = 0;\nfunction bump() { count++; return count; }",
    use: "bump()",
    kept: false,
  },
  {
    name: "class with a static block",
    define: "class Registry { static items: number[] = []; static { Registry.items.push(1); } }",
    use: "Registry.items.length",
    kept: false,
  },
  {
    name: "declared only",
    define: "declare function ghost(): number;",
    use: "ghost()",
    kept: false,
  },
];

describe.each([
  ["process", () => new ProcessDriver({ poolSize: 1, maxProcesses: 2, sessionsPerProcess: 4 })],
  ["in-process", () => new InProcessDriver({ maxSessions: 4 })],
] as const)("session definitions (%s driver)", (_name, createDriver) => {
  const driver: SandboxDriver = createDriver();
  const runtimes: MossRuntime[] = [];

  async function compile(context?: MossContext): Promise<MossRuntime> {
    const compiler = new MossCompiler({ sandbox: driver, limits: LIMITS }).bind(Vault, new Vault());
    if (context !== undefined) compiler.joinContext(context);
    const runtime = await compiler.compile(SECURITY_MODULE);
    runtimes.push(runtime);
    return runtime;
  }

  afterEach(async () => {
    await Promise.all(runtimes.splice(0).map((runtime) => runtime.close()));
  });
  afterAll(async () => {
    await driver.close();
  });

  test("a session whose isolate was rebuilt (after a timeout) keeps its earlier helper", async () => {
    const runtime = await compile();
    expectOk(
      await runtime.execute({
        code: "function helper(n: number) { return n * 10; }\nasync function main(moss: Moss) { return helper(1); }",
      }),
    );
    await killIsolate(runtime);
    const after = await runtime.execute({ code: "async function main(moss: Moss) { return helper(4); }" });
    expectOk(after);
    expect(after.returns).toBe(40);
  });

  test("a runtime made from the saved context (a restart, an eviction) has the definitions in its checker and sandbox", async () => {
    const first = await compile();
    expectOk(
      await first.execute({
        code: "const RATE = 3;\nclass Meter { read(n: number) { return n * RATE; } }\nasync function main(moss: Moss) { moss.counter = 5; return 0; }",
      }),
    );
    const saved = first.dumpContext();
    expect(saved.definitions).toContain("class Meter");
    // Through JSON, as a context file or a database row holds it.
    const restored = await compile(JSON.parse(JSON.stringify(saved)) as MossContext);
    const after = await restored.execute({
      code: "async function main(moss: Moss) { return new Meter().read(moss.counter); }",
    });
    expectOk(after);
    expect(after.returns).toBe(15);
  });

  test.each(KINDS)("checker and sandbox agree on a rebuilt session: $name", async (kind) => {
    const runtime = await compile();
    expectOk(
      await runtime.execute({ code: `${kind.define}\nasync function main(moss: Moss) { return 0; }` }),
    );
    await killIsolate(runtime);
    const use = await runtime.execute({ code: `async function main(moss: Moss) { return ${kind.use}; }` });
    // The property: a strict check that passes means the rebuilt run passes.
    if (use.error?.kind !== "type") expectOk(use);
    if (kind.kept) {
      expectOk(use);
      expect(use.returns).toEqual(kind.returns);
    } else {
      expect(use.error?.kind).toBe("type");
      expect(use.error?.message).toMatch(/not kept between executes/);
    }
  });

  test("a definition redefined as a let is no longer known to the checker, nor are the helpers that read it", async () => {
    const runtime = await compile();
    expectOk(
      await runtime.execute({
        code: "const BASE = 2;\nfunction scaled(n: number) { return n * BASE; }\nasync function main() { return scaled(1); }",
      }),
    );
    expectOk(await runtime.execute({ code: "let BASE = 5;\nasync function main() { return BASE; }" }));
    await killIsolate(runtime);
    const use = await runtime.execute({ code: "async function main() { return scaled(3); }" });
    expect(use.error?.kind).toBe("type");
    expect(use.error?.message).toMatch(/uses 'BASE', which is not kept/);
  });
});

describe("a session moved to another process", () => {
  const driver = new ProcessDriver({ poolSize: 1, maxProcesses: 2, sessionsPerProcess: 4 });
  afterAll(async () => {
    await driver.close();
  });

  test("keeps its helper when its run waits behind a spinning neighbour and moves", async () => {
    let signalSpinning!: () => void;
    const spinningStarted = new Promise<void>((resolve) => {
      signalSpinning = resolve;
    });
    const spinner = await new MossCompiler({ sandbox: driver, limits: LIMITS })
      .bind(Vault, new Vault())
      .withLocals({ spinning: () => signalSpinning() })
      .compile(SECURITY_MODULE);
    const mover = await new MossCompiler({ sandbox: driver, limits: LIMITS })
      .bind(Vault, new Vault())
      .compile(SECURITY_MODULE);
    try {
      expectOk(await spinner.execute({ code: "function main() { return 0; }", typeCheck: "off" }));
      expectOk(
        await mover.execute({
          code: "function helper(n: number) { return 'helped ' + n; }\nasync function main(moss: Moss) { return helper(0); }",
        }),
      );
      // Both sessions share a process (four sessions a process, the second opened beside the first): the mover's next
      // run waits behind the spinner until the driver moves it to an idle process, rebuilt there.
      let spinnerEnded = false;
      const spinning = spinner
        .execute({ code: "function main() { spinning(); for (;;) {} }", typeCheck: "off" })
        .finally(() => {
          spinnerEnded = true;
        });
      await spinningStarted;
      const moved = await mover.execute({ code: "async function main(moss: Moss) { return helper(1); }" });
      const beforeSpinnerEnded = !spinnerEnded;
      expectOk(moved);
      expect(moved.returns).toBe("helped 1");
      // It ran while the spinner still spun: it was moved, not run in the warm isolate after the spinner ended.
      expect(beforeSpinnerEnded).toBe(true);
      expect((await spinning).error?.kind).toBe("timeout");
    } finally {
      await Promise.all([spinner.close(), mover.close()]);
    }
  });
});
