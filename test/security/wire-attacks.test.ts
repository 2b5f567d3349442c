import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { renderObservation } from "../../engine/agent/observation.ts";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { createContext, decodeProperties, encodeProperties } from "../../engine/context/index.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { SandboxDriver, SandboxRunResult, SandboxSession } from "../../engine/sandbox/sandbox.ts";
import type { Execution, ExecutionLimits, MossContext } from "../../engine/types.ts";
import { ByteStore, bytesProbe } from "../fixtures/security/bytes.ts";
import { watchHostLoop } from "../helpers/host-loop-watch.ts";

/*
 * Attacks on what crosses the wire (issue 8, classes 3 and 5), as model code through the real MossRuntime on both
 * drivers. Every attack also asserts that the host's event loop stayed responsive (no single host-side step blocked
 * longer than a generous bound, measured with watchHostLoop) and that the last good values survive.
 */

const MODULE = "test/fixtures/security/wire-context.ts";

const LIMITS: ExecutionLimits = {
  wallTimeMs: 5_000,
  cpuTimeMs: 4_000,
  memoryLimitBytes: 64 * 1024 * 1024,
  maxStdoutBytes: 4_096,
  maxHostCalls: 200,
  maxResultBytes: 64 * 1024,
};

/** Far above what a bounded host step takes even on a loaded machine, far below what the attacks cost unbounded. */
const MAX_HOST_BLOCK_MS = 1_000;

afterAll(async () => {
  await closeSharedSandboxes();
});

function expectOutputLimit(execution: Execution): void {
  expect(execution.ok).toBe(false);
  expect(execution.error?.kind, JSON.stringify(execution.error)).toBe("output-limit");
  expect(execution.returns).toBeUndefined();
}

function contextBytes(context: MossContext): number {
  return JSON.stringify(context).length;
}

/** Model code building a value of 2^levels leaves out of `levels` shared arrays (tiny on the wire). */
function exponential(levels: number, wrap = "[v, v]"): string {
  return `let v: any = [1]; for (let i = 0; i < ${levels}; i++) v = ${wrap};`;
}

describe.each(["process", "in-process"] as const)("wire attacks (%s driver)", (driver) => {
  let store: ByteStore;
  let runtime: MossRuntime;

  async function open(context?: MossContext): Promise<MossRuntime> {
    store = new ByteStore();
    const compiler = new MossCompiler({ sandbox: driver, limits: LIMITS }).bind(ByteStore, store);
    if (context) compiler.joinContext(context);
    return compiler.compile(MODULE);
  }

  /** Runs model code (type-check off: the attacks are about the sandbox) with the event loop watched. */
  async function run(code: string, on: MossRuntime = runtime) {
    const { value, maxBlockMs } = await watchHostLoop(() => on.execute({ code, typeCheck: "off" }));
    expect(maxBlockMs, "the host event loop stalled").toBeLessThan(MAX_HOST_BLOCK_MS);
    return value;
  }

  /** Saves a known good value in `moss.stash` and `moss.notes`. */
  async function saveGood(): Promise<void> {
    const saved = await run(`function main(moss: Moss) { moss.stash = { good: 1 }; moss.notes = ["good"]; }`);
    expect(saved.ok).toBe(true);
  }

  async function expectGoodSurvives(on: MossRuntime = runtime): Promise<void> {
    const read = await run(`function main(moss: Moss) { return [moss.stash, moss.notes]; }`, on);
    expect(read.returns).toEqual([{ good: 1 }, ["good"]]);
  }

  beforeAll(async () => {
    runtime = await open();
    // Warm up (sandbox process, esbuild), so the watched steps below are the attacks' own.
    await runtime.execute({ code: "function main() { return 1; }", typeCheck: "off" });
  });

  afterAll(async () => {
    await runtime?.close();
  });

  beforeEach(() => {
    bytesProbe.received.length = 0;
  });

  describe("class 3: limits bound the expanded value", () => {
    test("an exponential shared structure in a data field is refused by name; the last good value is kept", async () => {
      await saveGood();
      const execution = await run(`function main(moss: Moss) { ${exponential(22)} moss.stash = v; }`);
      expect(execution.ok).toBe(true);
      expect(execution.warnings.join("\n")).toMatch(/moss\.stash .*larger than the limit/);
      expect(contextBytes(execution.context)).toBeLessThan(LIMITS.maxResultBytes);
      expect(decodeProperties(execution.context.properties).stash).toEqual({ good: 1 });
      await expectGoodSurvives();
      // Later executes pay nothing for it: the value is not in the isolate nor in the context any more.
      const later = await run(`function main() { return 1; }`);
      expect(later.warnings).toEqual([]);
    });

    test("one field over the limit does not cost the others: the rest of the snapshot is saved", async () => {
      await saveGood();
      const execution = await run(
        `function main(moss: Moss) { ${exponential(20)} moss.other = v; moss.notes = ["new"]; }`,
      );
      expect(execution.warnings.join("\n")).toMatch(/moss\.other /);
      const read = await run(`function main(moss: Moss) { return [moss.notes, moss.other, moss.stash]; }`);
      expect(read.returns).toEqual([["new"], null, { good: 1 }]);
      await run(`function main(moss: Moss) { moss.notes = ["good"]; }`);
    });

    test("an exponential structure through Map values and object keys is refused too", async () => {
      await saveGood();
      const execution = await run(`function main(moss: Moss) {
  let v: any = { leaf: "x" };
  for (let i = 0; i < 24; i++) v = new Map<any, any>([["a", v], ["b", { again: v }]]);
  moss.stash = v;
}`);
      expect(execution.warnings.join("\n")).toMatch(/moss\.stash .*larger than the limit/);
      await expectGoodSurvives();
    });

    test("an exponential return value is output-limit and never reaches the observation renderer", async () => {
      const execution = await run(`function main() { ${exponential(30)} return v; }`);
      expectOutputLimit(execution);
      const { maxBlockMs, value } = await watchHostLoop(async () => renderObservation(execution));
      expect(value).toContain("output-limit");
      expect(maxBlockMs).toBeLessThan(MAX_HOST_BLOCK_MS);
    });

    test("an exponential argument to a host method is refused before the host builds it", async () => {
      const execution = await run(`function main(moss: Moss) {
  ${exponential(30)}
  try { return moss.bytes.accept(v); } catch (error) { return (error as Error).message; }
}`);
      expect(execution.returns).toMatch(/larger than the limit of \d+ bytes once expanded/);
      expect(bytesProbe.received).toEqual([]);
    });

    test("a huge bigint in a data field is refused by name and costs later executes nothing", async () => {
      await saveGood();
      const execution = await run(`function main(moss: Moss) { moss.stash = 7n ** 20_000n; }`);
      expect(execution.warnings.join("\n")).toMatch(/moss\.stash holds a bigint of more than 4300 digits/);
      expect(contextBytes(execution.context)).toBeLessThan(4_096);
      await expectGoodSurvives();
    });

    test("a huge bigint returned is output-limit; one within the bound round-trips", async () => {
      expectOutputLimit(await run(`function main() { return { n: 7n ** 20_000n }; }`));
      const fits = await run(`function main() { return 7n ** 1_000n; }`);
      expect(fits.returns).toBe(7n ** 1_000n);
    });

    test("deep nesting in a data field is refused by name; the last good value is kept", async () => {
      await saveGood();
      const execution = await run(
        `function main(moss: Moss) { let v: any = 0; for (let i = 0; i < 5_000; i++) v = [v]; moss.stash = v; }`,
      );
      expect(execution.warnings.join("\n")).toMatch(/moss\.stash .*nested deeper than 1000 levels/);
      await expectGoodSurvives();
    });

    test("a cyclic structure full of shared references is bounded, never expanded without end", async () => {
      await saveGood();
      const execution = await run(`function main(moss: Moss) {
  const nodes: any[] = [];
  for (let i = 0; i < 40; i++) nodes.push({ i });
  for (const node of nodes) node.all = nodes;
  moss.stash = nodes;
}`);
      // Either it fits (and round-trips with its cycles) or it is refused by name; the host never hangs.
      if (execution.warnings.length > 0) {
        expect(execution.warnings.join("\n")).toMatch(/moss\.stash /);
        await expectGoodSurvives();
      } else {
        const read = await run(
          `function main(moss: Moss) { const s: any = moss.stash; return s[3].all === s; }`,
        );
        expect(read.returns).toBe(true);
        await saveGood();
      }
    });

    test("a data field restored from a hostile context document is refused before the host expands it", async () => {
      // superjson's referential equalities make level k hold level k-1 twice: 2^22 leaves from a few hundred bytes.
      const levels = 22;
      const json: Record<string, unknown> = { l0: [1] };
      const equalities: Record<string, string[]> = {};
      for (let i = 1; i <= levels; i++) {
        json[`l${i}`] = [null, null];
        equalities[`l${i - 1}`] = [`l${i}.0`, `l${i}.1`];
      }
      const properties = { stash: { json, meta: { referentialEqualities: equalities } } };
      const { value: opened, maxBlockMs } = await watchHostLoop(() =>
        open({ ...createContext(MODULE), properties }).catch((error: unknown) => error),
      );
      expect(maxBlockMs).toBeLessThan(MAX_HOST_BLOCK_MS);
      expect(opened).toBeInstanceOf(Error);
      expect((opened as Error).message).toMatch(/properties\.stash is larger than the limit/);
    });
  });

  describe("class 5: binary data crosses by copy, restored data lives in the isolate", () => {
    test("a returned Buffer arrives as a Uint8Array of exactly its bytes, never Node's shared pool", async () => {
      const execution = await run(`function main(moss: Moss) {
  const bytes: any = moss.bytes.buffer();
  return {
    tag: Object.prototype.toString.call(bytes),
    isUint8Array: bytes instanceof Uint8Array,
    length: bytes.length,
    poolBytes: bytes.buffer?.byteLength,
    text: String.fromCharCode(...bytes),
    bufferOnly: typeof bytes.write + typeof bytes.readUInt8,
  };
}`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual({
        tag: "[object Uint8Array]",
        isUint8Array: true,
        length: 10,
        poolBytes: 10,
        text: "host-bytes",
        bufferOnly: "undefinedundefined",
      });
      expect(store.intact()).toBe(true);
    });

    test("writing into returned typed arrays, ArrayBuffers and DataViews never changes the host's bytes", async () => {
      const execution = await run(`function main(moss: Moss) {
  const buffer: any = moss.bytes.buffer();
  try { buffer.write?.("zzzz"); } catch {}
  try { buffer.fill(0); } catch {}
  buffer[0] = 1;
  const numbers: any = moss.bytes.numbers();
  try { numbers.fill(9); } catch {}
  numbers[1] = 7;
  const raw: any = moss.bytes.raw();
  new Uint8Array(raw)[0] = 0;
  const view: any = moss.bytes.view();
  try { view.setUint8(0, 0); } catch {}
  return [Object.prototype.toString.call(numbers), numbers.length, raw.byteLength, view.byteLength,
          view instanceof DataView, raw instanceof ArrayBuffer];
}`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual(["[object Uint16Array]", 4, 3, 2, true, true]);
      expect(store.intact()).toBe(true);
    });

    test("binary arguments from the isolate arrive on the host as copies of every kind", async () => {
      const execution = await run(`function main(moss: Moss) {
  const bytes = new Uint8Array([1, 2, 3]);
  const wide = new Int32Array([-1]);
  const big = new BigInt64Array([5n]);
  const buffer = new Uint8Array([4, 5]).buffer;
  const view = new DataView(new Uint8Array([6, 7, 8]).buffer, 1);
  return [moss.bytes.accept(bytes), moss.bytes.accept(wide), moss.bytes.accept(big),
          moss.bytes.accept(buffer), moss.bytes.accept(view), bytes.join(",")];
}`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual([
        "[object Uint8Array]:3:1,2,3",
        "[object Int32Array]:4:255,255,255,255",
        "[object BigInt64Array]:8:5,0,0,0,0,0,0,0",
        "[object ArrayBuffer]:2:4,5",
        "[object DataView]:2:7,8",
        "1,2,3",
      ]);
      const [received] = bytesProbe.received as Uint8Array[];
      expect(received).toBeInstanceOf(Uint8Array);
      received![0] = 99; // the host's copy is its own: the isolate's array is untouched (checked above by join)
    });

    test("binary data counts its bytes against the result limit", async () => {
      expectOutputLimit(
        await run(`function main() { return new Uint8Array(${LIMITS.maxResultBytes + 1}); }`),
      );
      const fits = await run(`function main() { return new Uint8Array(1_000).fill(7); }`);
      expect(fits.returns).toBeInstanceOf(Uint8Array);
      expect((fits.returns as Uint8Array).length).toBe(1_000);
    });

    test("typed arrays in data fields persist and come back as isolate typed arrays in a new runtime", async () => {
      await saveGood();
      const execution = await run(
        `function main(moss: Moss) { moss.other = [new Float64Array([1.5, -2]), new Uint8Array([7]).buffer]; }`,
      );
      expect(execution.warnings).toEqual([]);
      const next = await open(execution.context);
      try {
        const read = await run(
          `function main(moss: Moss) {
  const [floats, raw] = moss.other as any[];
  return [floats instanceof Float64Array, Array.from(floats), raw instanceof ArrayBuffer, raw.byteLength];
}`,
          next,
        );
        expect(read.error).toBeUndefined();
        expect(read.returns).toEqual([true, [1.5, -2], true, 1]);
      } finally {
        await next.close();
      }
    });

    test("a URL restored from a context document never becomes a host proxy inside the isolate", async () => {
      const properties = encodeProperties({
        stash: new URL("https://example.com/secret?token=1"),
        notes: ["good"],
      }).properties;
      const restored = await open({ ...createContext(MODULE), properties });
      try {
        const read = await run(
          `function main(moss: Moss) {
  const link: any = moss.stash;
  return [typeof link, link === undefined ? "absent" : Object.prototype.toString.call(link), moss.notes];
}`,
          restored,
        );
        expect(read.error).toBeUndefined();
        expect(read.returns).toEqual(["undefined", "absent", ["good"]]);
        expect(read.warnings.join("\n")).toMatch(
          /moss\.stash is an instance of URL, which has no plain-data form/,
        );
        // The saved value is kept on the host and in the context, until the code sets the field itself.
        expect(read.context.properties.stash).toEqual(properties.stash);
        const again = await run(`function main(moss: Moss) { return moss.stash; }`, restored);
        expect(again.returns).toBeUndefined();
        expect(again.context.properties.stash).toEqual(properties.stash);
        const replaced = await run(
          `function main(moss: Moss) { moss.stash = "https://example.com/"; }`,
          restored,
        );
        expect(decodeProperties(replaced.context.properties).stash).toBe("https://example.com/");
      } finally {
        await restored.close();
      }
    });

    test("a typed array restored from a context document is an isolate typed array, not a host proxy", async () => {
      const properties = encodeProperties({ stash: new Uint8Array([1, 2, 3]) }).properties;
      const restored = await open({ ...createContext(MODULE), properties });
      try {
        const read = await run(
          `function main(moss: Moss) {
  const bytes: any = moss.stash;
  bytes[0] = 42;
  return [bytes instanceof Uint8Array, Object.getPrototypeOf(bytes) === Uint8Array.prototype, Array.from(bytes)];
}`,
          restored,
        );
        expect(read.error).toBeUndefined();
        expect(read.returns).toEqual([true, true, [42, 2, 3]]);
        const again = await run(`function main(moss: Moss) { return moss.stash; }`, restored);
        expect(again.returns).toEqual(new Uint8Array([42, 2, 3]));
      } finally {
        await restored.close();
      }
    });
  });
});

describe("class 3: the host bounds what a compromised sandbox sends back", () => {
  /** A driver whose sandbox answers every run with the given result text (as a subverted isolate could). */
  function hostileDriver(result: Partial<SandboxRunResult>): SandboxDriver {
    return {
      name: "in-process",
      async open(): Promise<SandboxSession> {
        return {
          alive: true,
          async run(): Promise<SandboxRunResult> {
            return { ok: true, stdout: "", warnings: [], hostCalls: 0, cpuTimeMs: 0, ...result };
          },
          async dispose() {},
        };
      },
      async close() {},
    };
  }

  /** Wire text of `[v, v]` nested `levels` times: a few hundred bytes, 2^levels leaves once expanded. */
  function exponentialWire(levels: number, root?: (index: number) => unknown[]): string {
    const nodes: unknown[] = [];
    const offset = root ? 1 : 0;
    for (let i = 0; i < levels; i++) nodes.push(["A", offset + i + 1, offset + i + 1]);
    nodes.push(1);
    return JSON.stringify(root ? [root(1), ...nodes] : nodes);
  }

  test("an exponential return value and data field are refused by the host, which never expands them", async () => {
    const runtime = await new MossCompiler({
      sandbox: hostileDriver({
        returns: exponentialWire(40),
        mossData: exponentialWire(40, (index) => ["O", "stash", index]),
      }),
      limits: LIMITS,
    })
      .bind(ByteStore, new ByteStore())
      .compile(MODULE);
    try {
      const { value: execution, maxBlockMs } = await watchHostLoop(() =>
        runtime.execute({ code: "function main() { return 1; }", typeCheck: "off" }),
      );
      expect(maxBlockMs).toBeLessThan(MAX_HOST_BLOCK_MS);
      expectOutputLimit(execution);
      expect(execution.warnings.join("\n")).toMatch(/moss\.stash is larger than the limit/);
      expect(decodeProperties(execution.context.properties).stash).toBeNull();
    } finally {
      await runtime.close();
    }
  });

  test.each([
    ["a host handle", '[["O","stash",1],["H",{"id":1,"kind":"object","methods":["read"],"properties":[]}]]'],
    ["an unknown node", '[["O","stash",1],["Z",1]]'],
    ["a bad special number", '[["O","stash",1],["N","42"]]'],
    ["a bigint that is not decimal", '[["O","stash",1],["B","0x10"]]'],
    ["bad base64", '[["O","stash",1],["T","Uint8Array","!!!!"]]'],
    ["a bad pattern", '[["O","stash",1],["R","(",""]]'],
    ["a handle in a field sent with another", '[["O","notes",2,"stash",1],["A",3],["A"],["H",{"id":2}]]'],
  ])(
    "a data field holding %s is refused by the host and never stored (the context keeps loading)",
    async (_, mossData) => {
      const runtime = await new MossCompiler({ sandbox: hostileDriver({ mossData }), limits: LIMITS })
        .bind(ByteStore, new ByteStore())
        .compile(MODULE);
      try {
        const execution = await runtime.execute({ code: "function main() { return 1; }", typeCheck: "off" });
        expect(execution.ok).toBe(false);
        expect(execution.error?.message).toMatch(
          /^the sandbox returned a malformed result: invalid wire text/,
        );
        // Nothing the sandbox sent was kept: the stored data are the module's initial values and still decode.
        expect(decodeProperties(execution.context.properties)).toEqual({
          notes: [],
          stash: null,
          other: null,
        });
      } finally {
        await runtime.close();
      }
    },
  );
});
