import { types } from "node:util";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { Execution } from "../../engine/types.ts";
import { Drawer, VAULT_FILE, vaultProbe } from "../fixtures/security/vault.ts";
import { breachHelper, HOST_PATHS, LIMITS, SecurityRig } from "./security-harness.ts";

/*
 * Escape and abuse attempts written as model code, each run through the real MossRuntime on both drivers. Each
 * test asserts the safe outcome and then that the host is unchanged (see SecurityRig.expectHostUnchanged).
 */

afterAll(async () => {
  await closeSharedSandboxes();
});

/** The memory limit stays small; time is generous so the memory limit, not a timeout, ends the bombs. */
const MEMORY_LIMITS = { wallTimeMs: 15_000, cpuTimeMs: 15_000 };

function expectNoHostPath(text: unknown): void {
  const shown = typeof text === "string" ? text : JSON.stringify(text);
  for (const hostPath of HOST_PATHS) expect(shown).not.toContain(hostPath);
}

function expectFailure(execution: Execution, kind: string): void {
  expect(execution.ok).toBe(false);
  expect(execution.error?.kind, JSON.stringify(execution.error)).toBe(kind);
  expect(execution.returns).toBeUndefined();
}

describe.each(["process", "in-process"] as const)("security battery (%s driver)", (driver) => {
  const rig = new SecurityRig(driver);

  beforeAll(async () => {
    await rig.open();
  });

  afterAll(async () => {
    await rig.close();
  });

  beforeEach(() => {
    vaultProbe.received.length = 0;
  });

  describe("constructor chains to the host Function", () => {
    test("this.constructor.constructor reaches only the isolate's own Function", async () => {
      const execution = await rig.run(`${breachHelper()}
function main(this: any, moss: Moss) {
  const self = this ?? globalThis;
  let direct: string;
  try {
    direct = typeof self.constructor.constructor("return process")();
  } catch (error) {
    direct = "blocked: " + (error as Error).name;
  }
  return { direct, breach: breach(self.constructor.constructor) };
}`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual({ direct: "blocked: ReferenceError", breach: "undefined" });
      await rig.expectHostUnchanged();
    });

    test("a proxy's method, the proxy itself and its prototype expose no constructor", async () => {
      const execution = await rig.run(`${breachHelper()}
function main(moss: Moss) {
  const vault: any = moss.vault;
  return {
    methodConstructor: typeof vault.read.constructor,
    proxyConstructor: typeof vault.constructor,
    proxyPrototype: Object.getPrototypeOf(vault),
    methodPrototype: Object.getPrototypeOf(vault.read),
    functionPrototype: Object.getPrototypeOf(double),
    functionConstructor: typeof (double as any).constructor,
    viaMethod: breach(vault.read.constructor?.constructor),
    viaProxy: breach(vault.constructor?.constructor),
    viaCall: typeof (vault.read as any).call,
  };
}`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual({
        methodConstructor: "undefined",
        proxyConstructor: "undefined",
        proxyPrototype: null,
        methodPrototype: null,
        functionPrototype: null,
        functionConstructor: "undefined",
        viaMethod: "blocked: TypeError",
        viaProxy: "blocked: TypeError",
        viaCall: "undefined",
      });
      await rig.expectHostUnchanged();
    });

    test("values, errors and promises coming back from host calls belong to the isolate's realm", async () => {
      const execution = await rig.run(`${breachHelper()}
async function main(moss: Moss) {
  const fromString = breach((moss.vault.read("k") as any).constructor.constructor);
  const pending: any = moss.vault.fetch("k");
  const fromPromise = breach(pending.constructor.constructor);
  await pending;
  let fromError = "";
  try {
    moss.vault.fail();
  } catch (error) {
    fromError = breach((error as any).constructor.constructor);
  }
  const drawer: any = moss.vault.drawer();
  const fromHandle = breach(drawer.open.constructor?.constructor);
  const fromMoss = breach((moss as any).constructor.constructor);
  const fromPprint = typeof (moss.pprint as any).constructor;
  return { fromString, fromPromise, fromError, fromHandle, fromMoss, fromPprint };
}`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual({
        fromString: "undefined",
        fromPromise: "undefined",
        fromError: "undefined",
        fromHandle: "blocked: TypeError",
        fromMoss: "undefined",
        fromPprint: "undefined",
      });
      await rig.expectHostUnchanged();
    });

    test("prototype walks from proxies find nothing (__proto__, prototype, constructor, descriptors)", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  const vault: any = moss.vault;
  const seen: Record<string, string> = {};
  for (const name of ["__proto__", "prototype", "constructor", "caller", "arguments", "call", "apply", "bind"]) {
    seen["vault." + name] = typeof vault[name];
    seen["read." + name] = typeof vault.read[name];
    seen["double." + name] = typeof (double as any)[name];
  }
  let redefined = "no";
  try {
    Object.setPrototypeOf(vault, { read: () => "fake" });
    redefined = "yes";
  } catch (error) {
    redefined = (error as Error).name;
  }
  return { seen, redefined, frozen: Object.isFrozen(vault) && Object.isFrozen(vault.read) };
}`);
      expect(execution.error).toBeUndefined();
      const returns = execution.returns as {
        seen: Record<string, string>;
        redefined: string;
        frozen: boolean;
      };
      expect(Object.values(returns.seen).every((kind) => kind === "undefined")).toBe(true);
      expect(returns.redefined).toBe("TypeError");
      expect(returns.frozen).toBe(true);
      await rig.expectHostUnchanged();
    });
  });

  describe("probing for process, require, import() and the host global", () => {
    test("process, require, module, Buffer and friends do not exist", async () => {
      const execution = await rig.run(`
function main() {
  const names = ["process", "require", "module", "exports", "Buffer", "__dirname", "__filename", "global",
    "WebAssembly", "SharedArrayBuffer", "Atomics", "ivm", "_ivm", "isolatedVm", "hiddenHelper", "HIDDEN_VALUE",
    "__moss_compile__", "container", "compiler", "runtime", "vaultProbe", "Drawer"];
  const kinds: Record<string, string> = {};
  for (const name of names) kinds[name] = typeof (globalThis as any)[name];
  const own = Object.getOwnPropertyNames(globalThis).filter((name) => names.includes(name));
  let viaEval: string;
  try {
    viaEval = typeof eval("process");
  } catch (error) {
    viaEval = (error as Error).name;
  }
  const viaFunction = typeof new Function("return this")().process;
  return { kinds, own, viaEval, viaFunction };
}`);
      expect(execution.error).toBeUndefined();
      const returns = execution.returns as { kinds: Record<string, string>; own: string[] };
      expect(Object.entries(returns.kinds).filter(([, kind]) => kind !== "undefined")).toEqual([]);
      expect(returns.own).toEqual([]);
      expect(execution.returns).toMatchObject({ viaEval: "ReferenceError", viaFunction: "undefined" });
      await rig.expectHostUnchanged();
    });

    test("dynamic import() of a host module fails inside the sandbox", async () => {
      const execution = await rig.run(`
async function main() {
  const fs: any = await import("node:fs");
  fs.writeFileSync("/tmp/moss-should-not-exist", "x");
  return "imported";
}`);
      expect(execution.ok).toBe(false);
      expect(execution.error?.kind).toBe("runtime");
      await rig.expectHostUnchanged();
    });

    test("a static import is rejected before anything runs (default strict mode)", async () => {
      const execution = await rig.runtime.execute({
        code: `import { readFileSync } from "node:fs";
async function main() {
  return readFileSync("/etc/passwd", "utf8");
}`,
      });
      expect(execution.ok).toBe(false);
      expect(["syntax", "type"]).toContain(execution.error?.kind);
      expect(execution.error?.line).toBe(1);
      await rig.expectHostUnchanged();
    });

    test("type diagnostics about host types name no host paths (default strict mode)", async () => {
      const execution = await rig.runtime.execute({
        code: `async function main(moss: Moss) {
  const count: number = moss.vault.drawer();
  const other: string = moss.vault.fetch("k");
  return [count, other];
}`,
      });
      expectFailure(execution, "type");
      expectNoHostPath(execution.error);
      await rig.expectHostUnchanged();
    });

    test("process is a type error in the default strict mode", async () => {
      const execution = await rig.runtime.execute({
        code: `async function main(moss: Moss) {
  return process.pid;
}`,
      });
      expectFailure(execution, "type");
      expect(execution.error?.line).toBe(2);
      await rig.expectHostUnchanged();
    });
  });

  describe("hidden names, private members and the container", () => {
    test("hidden-region names of the module are unreachable at run time", async () => {
      const execution = await rig.run(`
function main() {
  const g: any = globalThis;
  let called: string;
  try {
    called = g.hiddenHelper();
  } catch (error) {
    called = (error as Error).name;
  }
  return { called, value: typeof g.HIDDEN_VALUE, hook: typeof g.__moss_compile__ };
}`);
      expect(execution.returns).toEqual({ called: "TypeError", value: "undefined", hook: "undefined" });
      await rig.expectHostUnchanged();
    });

    test("a hidden helper is a type error in the default strict mode", async () => {
      const execution = await rig.runtime.execute({
        code: `async function main(moss: Moss) {
  return hiddenHelper();
}`,
      });
      expectFailure(execution, "type");
      await rig.expectHostUnchanged();
    });

    test("#, TS-private and _-prefixed members of a service are unreachable", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  const vault: any = moss.vault;
  let internal: string;
  try {
    internal = vault._internal();
  } catch (error) {
    internal = (error as Error).name;
  }
  return {
    token: typeof vault.token,
    secret: typeof vault["#secret"],
    secretPlain: typeof vault.secret,
    internal,
    keys: Reflect.ownKeys(vault).map(String).sort(),
  };
}`);
      expect(execution.error).toBeUndefined();
      const returns = execution.returns as { keys: string[] };
      expect(returns).toMatchObject({
        token: "undefined",
        secret: "undefined",
        secretPlain: "undefined",
        internal: "TypeError",
      });
      expect(returns.keys).not.toContain("token");
      expect(returns.keys).not.toContain("_internal");
      expect(returns.keys.filter((key) => key.startsWith("_") || key.startsWith("#"))).toEqual([]);
      await rig.expectHostUnchanged();
    });

    test("a visible service class cannot be built with new; the injected instance shows only the public members", async () => {
      // Vault is the service's class (issue 15: model code never constructs a service class), so the code works
      // with the instance the host injected.
      const execution = await rig.run(`
function main(moss: any) {
  let built: string;
  try {
    new (Vault as any)();
    built = "constructed";
  } catch (error) {
    built = (error as Error).name;
  }
  const vault = moss.vault;
  let internal: string;
  try {
    internal = vault._internal();
  } catch (error) {
    internal = (error as Error).name;
  }
  return { built, token: typeof vault.token, internal, read: vault.read("k"), keys: Reflect.ownKeys(vault).map(String) };
}`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toMatchObject({
        built: "TypeError",
        token: "undefined",
        internal: "TypeError",
        read: "value of k",
      });
      expect((execution.returns as { keys: string[] }).keys).not.toContain("token");
      await rig.expectHostUnchanged();
    });

    test("a TS-private member is a type error in the default strict mode", async () => {
      const execution = await rig.runtime.execute({
        code: `async function main(moss: Moss) {
  return moss.vault.token;
}`,
      });
      expectFailure(execution, "type");
      await rig.expectHostUnchanged();
    });

    test("private members of a host object returned by a method stay unreachable", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  const drawer: any = moss.vault.drawer();
  return {
    opened: drawer.open(),
    name: drawer.name,
    combination: typeof drawer.combination,
    contents: typeof drawer["#contents"],
    keys: Reflect.ownKeys(drawer).map(String).sort(),
  };
}`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toMatchObject({
        opened: "the top drawer holds 4 things",
        combination: "undefined",
        contents: "undefined",
      });
      expect((execution.returns as { keys: string[] }).keys).not.toContain("combination");
      expect(new Drawer().intact()).toBe(true);
      await rig.expectHostUnchanged();
    });

    test("the service's lifecycle hook is not callable from model code", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  (moss.vault as any).onDestroy();
  return "destroyed early";
}`);
      expectFailure(execution, "runtime");
      expect(vaultProbe.destroyed.has(rig.vault)).toBe(false);
      await rig.expectHostUnchanged();
    });

    test("the container, the compiler and the runtime are not reachable from moss or the global", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  const m: any = moss;
  const g: any = globalThis;
  return [m.container, m.runtime, m.compiler, m.$container, g.container, g.runtime, g.compiler].map((v) => typeof v);
}`);
      expect(execution.returns).toEqual(Array(7).fill("undefined"));
      await rig.expectHostUnchanged();
    });
  });

  describe("hostile values handed to host methods", () => {
    test("getters run inside the isolate; the host receives plain data", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  let reads = 0;
  const value = { get x() { reads++; return 1; }, nested: { get y() { return "two"; } } };
  return [moss.vault.store(value), reads];
}`);
      expect(execution.returns).toEqual(["object", 1]);
      const received = vaultProbe.received[0] as Record<string, unknown>;
      expect(Object.getPrototypeOf(received)).toBe(Object.prototype);
      expect(Object.getOwnPropertyDescriptor(received, "x")).toMatchObject({ value: 1 });
      expect(received).toEqual({ x: 1, nested: { y: "two" } });
      await rig.expectHostUnchanged();
    });

    test("an object with toJSON or a function inside cannot be copied to the host", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  const results: string[] = [];
  for (const value of [{ a: 1, toJSON() { return "evil"; } }, () => 1, { callback: () => 1 }, Symbol("s")]) {
    try {
      results.push(moss.vault.store(value));
    } catch (error) {
      results.push((error as Error).name);
    }
  }
  return results;
}`);
      expect(execution.returns).toEqual(["TypeError", "TypeError", "TypeError", "TypeError"]);
      expect(vaultProbe.received).toEqual([]);
      await rig.expectHostUnchanged();
    });

    test("a Proxy argument's traps run inside the isolate and the host gets a plain copy", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  const trapped: string[] = [];
  const proxy = new Proxy({ a: 1 }, {
    get(target, key, receiver) { trapped.push("get:" + String(key)); return Reflect.get(target, key, receiver); },
    ownKeys(target) { trapped.push("ownKeys"); return Reflect.ownKeys(target); },
    getPrototypeOf() { trapped.push("getPrototypeOf"); return Object.prototype; },
  });
  const stored = moss.vault.store(proxy);
  let thrown = "";
  try {
    moss.vault.store(new Proxy({}, { ownKeys() { throw new Error("trap"); } }));
  } catch (error) {
    thrown = (error as Error).message;
  }
  return { stored, trapped: trapped.length > 0, thrown };
}`);
      expect(execution.returns).toEqual({ stored: "object", trapped: true, thrown: "trap" });
      expect(vaultProbe.received).toHaveLength(1);
      expect(Object.getPrototypeOf(vaultProbe.received[0])).toBe(Object.prototype);
      expect(vaultProbe.received[0]).toEqual({ a: 1 });
      expect(types.isProxy(vaultProbe.received[0])).toBe(false);
      await rig.expectHostUnchanged();
    });

    test("a poisoned Object.prototype inside the isolate reaches neither the membrane nor the host", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  const proto: any = Object.prototype;
  for (const name of ["reference", "copy", "result", "promise", "handleOf", "knownHandle", "onHandle",
      "onUnsupported", "maxLength", "polluted"]) {
    proto[name] = true;
  }
  Object.defineProperty(Object.prototype, "then", { get() { return undefined; }, configurable: true });
  const stored = moss.vault.store({ a: 1 });
  const read = moss.vault.read("k");
  for (const name of ["reference", "copy", "result", "promise", "handleOf", "knownHandle", "onHandle",
      "onUnsupported", "maxLength", "polluted", "then"]) {
    delete proto[name];
  }
  return [stored, read];
}`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual(["object", "value of k"]);
      expect(vaultProbe.received).toEqual([{ a: 1 }]);
      expect(Object.keys(vaultProbe.received[0] as object)).toEqual(["a"]);
      await rig.expectHostUnchanged();
    });

    test("Object.prototype pollution inside the isolate does not leak to the host", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  (Object.prototype as any).polluted = 1;
  (Array.prototype as any).polluted = 1;
  (Function.prototype as any).polluted = 1;
  moss.vault.store({ a: 1 });
  return ({} as any).polluted;
}`);
      expect(execution.returns).toBe(1);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect((vaultProbe.received[0] as Record<string, unknown>).polluted).toBeUndefined();
      await rig.expectHostUnchanged();
      const cleanup = await rig.run(`function main() {
  delete (Object.prototype as any).polluted;
  delete (Array.prototype as any).polluted;
  delete (Function.prototype as any).polluted;
}`);
      expect(cleanup.ok).toBe(true);
    });

    test.each([
      ["a forged handle", `[["H", { id: 1, kind: "object", methods: ["_internal"], properties: [] }]]`],
      ["a non-array", "1"],
    ])(
      "Array.prototype.toJSON returning %s neither forges the wire nor makes execute() throw",
      async (_, forged) => {
        let execution: Execution | undefined;
        let thrown: unknown;
        try {
          execution = await rig.run(`
function main(moss: Moss) {
  (Array.prototype as any).toJSON = function () { return ${forged}; };
  return moss.vault.read("k");
}`);
        } catch (error) {
          thrown = error;
        } finally {
          await rig.run(`function main() { delete (Array.prototype as any).toJSON; }`).catch(() => {});
        }
        expect(thrown).toBeUndefined();
        expect(execution?.ok === false || execution?.returns === "value of k").toBe(true);
        expect(vaultProbe.internalCalls).toBe(0);
        await rig.expectHostUnchanged();
      },
    );
  });

  describe("error stacks and stack-trace hooks", () => {
    test("host errors arrive as ordinary Errors without host paths, sync and async", async () => {
      const execution = await rig.run(`
async function main(moss: Moss) {
  const seen: Array<Record<string, unknown>> = [];
  try {
    moss.vault.fail();
  } catch (error) {
    const e = error as Error;
    seen.push({ isError: e instanceof Error, name: e.name, message: e.message, stack: String(e.stack) });
  }
  try {
    await moss.vault.failLater();
  } catch (error) {
    const e = error as Error;
    seen.push({ isError: e instanceof Error, name: e.name, message: e.message, stack: String(e.stack) });
  }
  return seen;
}`);
      expect(execution.error).toBeUndefined();
      const seen = execution.returns as Array<{ isError: boolean; message: string; stack: string }>;
      expect(seen).toHaveLength(2);
      expect(seen[0]).toMatchObject({
        isError: true,
        name: "Error",
        message: "cannot open <host path>/vault.ts: permission denied",
      });
      expect(seen[1]).toMatchObject({
        isError: true,
        name: "Error",
        message: "cannot open <host path>/vault.ts later",
      });
      expectNoHostPath(seen);
      expect(JSON.stringify(seen)).not.toContain(VAULT_FILE);
      await rig.expectHostUnchanged();
    });

    test("an uncaught host error reports kind runtime without host paths", async () => {
      const execution = await rig.run(`
async function main(moss: Moss) {
  await moss.vault.failLater();
}`);
      expectFailure(execution, "runtime");
      expect(execution.error?.message).toContain("vault.ts");
      expectNoHostPath(execution.error);
      expectNoHostPath(execution.stdout);
      await rig.expectHostUnchanged();
    });

    test("Error.prepareStackTrace sees no host or bootstrap functions around a host error", async () => {
      const execution = await rig.run(`${breachHelper()}
function main(moss: Moss) {
  const functions: any[] = [];
  const files: string[] = [];
  (Error as any).prepareStackTrace = (_error: Error, frames: any[]) => {
    for (const frame of frames) {
      const fn = frame.getFunction?.();
      const self = frame.getThis?.();
      if (fn) functions.push(fn);
      if (self && self !== globalThis) functions.push(self);
      files.push(String(frame.getFileName?.()));
    }
    return "prepared";
  };
  try {
    moss.vault.fail();
  } catch (error) {
    void (error as Error).stack;
  }
  try {
    moss.vault.store({ get x() { return new Error("inside encode").stack; } });
  } catch {}
  (Error as any).prepareStackTrace = undefined;
  const own = new Set<any>([main, breach]);
  const foreign = functions.filter((fn) => !own.has(fn));
  return {
    foreign: foreign.map((fn) => breach(typeof fn === "function" ? fn.constructor : fn?.constructor?.constructor)),
    files,
  };
}`);
      expect(execution.error).toBeUndefined();
      const returns = execution.returns as { foreign: string[]; files: string[] };
      for (const outcome of returns.foreign)
        expect(outcome === "undefined" || outcome.startsWith("blocked")).toBe(true);
      expectNoHostPath(returns.files);
      await rig.expectHostUnchanged();
    });

    test("Error.captureStackTrace during argument encoding shows no host frames", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  const holder: { stack?: string } = {};
  moss.vault.store({ get x() { Error.captureStackTrace(holder); return 1; } });
  let onProxy: string;
  try {
    Error.captureStackTrace(moss.vault as any);
    onProxy = "captured";
  } catch (error) {
    onProxy = (error as Error).name;
  }
  return { stack: String(holder.stack), onProxy };
}`);
      expect(execution.error).toBeUndefined();
      const returns = execution.returns as { stack: string; onProxy: string };
      expectNoHostPath(returns.stack);
      expect(returns.onProxy).toBe("TypeError");
      await rig.expectHostUnchanged();
    });

    test("a throwing Error.prepareStackTrace still ends as a clean runtime error", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  (Error as any).prepareStackTrace = () => { throw new Error("no stacks for you"); };
  moss.vault.fail();
}`);
      expect(execution.ok).toBe(false);
      expect(execution.error?.kind).toBe("runtime");
      await rig.run(`function main() { (Error as any).prepareStackTrace = undefined; }`);
      await rig.expectHostUnchanged();
    });
  });

  describe("memory", () => {
    test("SharedArrayBuffer, Atomics and WebAssembly are absent and cannot be recovered", async () => {
      const execution = await rig.run(`
function main() {
  const g: any = globalThis;
  const names = Object.getOwnPropertyNames(g);
  return {
    sab: typeof g["Shared" + "ArrayBuffer"],
    atomics: typeof g.Atomics,
    wasm: typeof g.WebAssembly,
    listed: names.filter((name) => /Shared|Atomics|WebAssembly/.test(name)),
    fromFunction: typeof new Function("return typeof WebAssembly")(),
  };
}`);
      expect(execution.returns).toEqual({
        sab: "undefined",
        atomics: "undefined",
        wasm: "undefined",
        listed: [],
        fromFunction: "string",
      });
      await rig.expectHostUnchanged();
    });

    test("a resizable ArrayBuffer cannot grow past the isolate's memory limit", async () => {
      const execution = await rig.run(
        `
function main() {
  const size = 256 * 1024 * 1024;
  const buffer: any = new (ArrayBuffer as any)(0, { maxByteLength: size });
  if (typeof buffer.resize === "function") buffer.resize(size);
  const bytes = new Uint8Array(buffer);
  for (let i = 0; i < bytes.length; i += 4096) bytes[i] = 1;
  return bytes.length;
}`,
        { limits: MEMORY_LIMITS },
      );
      // Safe: the isolate refuses (an error) or the option is ignored (a fixed-size, empty buffer).
      if (execution.ok) expect(execution.returns).toBe(0);
      else expect(["memory", "runtime"]).toContain(execution.error?.kind);
      await rig.expectHostUnchanged();
    });

    test("a string memory bomb ends with kind memory", async () => {
      const execution = await rig.run(
        `
function main() {
  const keep: string[] = [];
  for (let i = 0; ; i++) keep.push("x".repeat(1024 * 1024) + i);
}`,
        { limits: MEMORY_LIMITS },
      );
      expectFailure(execution, "memory");
      await rig.expectHostUnchanged();
    });

    test("an array memory bomb ends with kind memory", async () => {
      const execution = await rig.run(
        `
function main() {
  const keep: number[][] = [];
  for (;;) keep.push(new Array(1_000_000).fill(1.5));
}`,
        { limits: MEMORY_LIMITS },
      );
      expectFailure(execution, "memory");
      await rig.expectHostUnchanged();
    });
  });

  describe("time", () => {
    test("an infinite loop ends with kind timeout while the host event loop keeps ticking", async () => {
      let ticks = 0;
      const ticker = setInterval(() => ticks++, 10);
      try {
        const execution = await rig.run(`function main() { for (;;) {} }`);
        expectFailure(execution, "timeout");
      } finally {
        clearInterval(ticker);
      }
      expect(ticks).toBeGreaterThan(0);
      await rig.expectHostUnchanged();
    });

    test("a microtask flood ends with kind timeout", async () => {
      let ticks = 0;
      const ticker = setInterval(() => ticks++, 10);
      try {
        const execution = await rig.run(`
async function main() {
  const spin = (): void => { void Promise.resolve().then(spin); };
  spin();
  await new Promise(() => {});
}`);
        expectFailure(execution, "timeout");
      } finally {
        clearInterval(ticker);
      }
      expect(ticks).toBeGreaterThan(0);
      await rig.expectHostUnchanged();
    });

    test("awaiting a host promise that never settles ends with kind timeout", async () => {
      const execution = await rig.run(`
async function main(moss: Moss) {
  return await moss.vault.waitForever();
}`);
      expectFailure(execution, "timeout");
      await rig.expectHostUnchanged();
    });

    // The result and the data snapshot run no model code (issue 24 §6): a getter is reported by name, never called,
    // so an infinite loop inside one cannot hold the run.
    test("an infinite loop in a getter of the result is never run: the getter is left out, by name", async () => {
      const execution = await rig.run(`
function main() {
  return { kept: 1, get trap() { for (;;) {} } };
}`);
      expect(execution.error, JSON.stringify(execution.error)).toBeUndefined();
      expect(execution.returns).toEqual({ kept: 1 });
      expect(execution.warnings.join("\n")).toMatch(/returns\.trap is a getter/);
      await rig.expectHostUnchanged();
    });

    test("an infinite loop in a data field's getter is never run by the snapshot: the field keeps its saved value", async () => {
      const before = await rig.run(`function main(moss: Moss) { moss.notes = ["kept"]; }`);
      expect(before.ok).toBe(true);
      const execution = await rig.run(`
function main(moss: Moss) {
  Object.defineProperty(moss, "notes", { get() { for (;;) {} }, configurable: true });
}`);
      expect(execution.error, JSON.stringify(execution.error)).toBeUndefined();
      expect(execution.warnings.join("\n")).toMatch(/moss\.notes is a getter.*not persisted/);
      const after = await rig.run(`function main(moss: Moss) { return moss.notes; }`);
      expect(after.returns).toEqual(["kept"]);
      await rig.expectHostUnchanged();
    });

    test("deep recursion ends with a runtime RangeError", async () => {
      const execution = await rig.run(`
function main() {
  const down = (n: number): number => down(n + 1) + 1;
  return down(0);
}`);
      expectFailure(execution, "runtime");
      expect(execution.error?.name).toBe("RangeError");
      await rig.expectHostUnchanged();
    });

    test("a deeply nested argument and return value fail cleanly", async () => {
      const argument = await rig.run(`
function main(moss: Moss) {
  let value: any = {};
  for (let i = 0; i < 200_000; i++) value = { value };
  return moss.vault.store(value);
}`);
      expect(argument.ok).toBe(false);
      expect(vaultProbe.received).toEqual([]);
      const returned = await rig.run(`
function main() {
  let value: any = [];
  for (let i = 0; i < 200_000; i++) value = [value];
  return value;
}`);
      expect(returned.ok).toBe(false);
      await rig.expectHostUnchanged();
    });
  });

  describe("output, host calls and results", () => {
    test("an output flood ends with kind output-limit and a visible truncation marker", async () => {
      const execution = await rig.run(`
function main() {
  for (let i = 0; ; i++) console.log("line " + i + " " + "x".repeat(80));
}`);
      expectFailure(execution, "output-limit");
      expect(execution.stdout).toMatch(/stdout truncated/);
      expect(Buffer.byteLength(execution.stdout)).toBeLessThan(LIMITS.maxStdoutBytes + 200);
      await rig.expectHostUnchanged();
    });

    test("an output flood that swallows the limit error still ends with kind output-limit", async () => {
      const execution = await rig.run(`
function main() {
  for (let i = 0; i < 5_000; i++) {
    try { console.log("x".repeat(100)); } catch {}
  }
  return "survived";
}`);
      expectFailure(execution, "output-limit");
      expect(execution.stdout).toMatch(/stdout truncated/);
      await rig.expectHostUnchanged();
    });

    test("a host-call flood ends with kind call-limit, even when the error is swallowed", async () => {
      const flood = await rig.run(`function main(moss: Moss) { for (;;) moss.vault.read("k"); }`);
      expectFailure(flood, "call-limit");
      const swallowed = await rig.run(`
function main(moss: Moss) {
  for (let i = 0; i < 10_000; i++) {
    try { moss.vault.read("k"); } catch {}
  }
  return "survived";
}`);
      expectFailure(swallowed, "call-limit");
      await rig.expectHostUnchanged();
    });

    test("an async host-call flood ends with kind call-limit", async () => {
      const execution = await rig.run(`
async function main(moss: Moss) {
  await Promise.all(Array.from({ length: 2_000 }, (_, i) => moss.vault.fetch("k" + i)));
}`);
      expectFailure(execution, "call-limit");
      await rig.expectHostUnchanged();
    });

    test("huge error text (message, name, stack) does not bypass the result limit", async () => {
      for (const code of [
        `function main() { throw new Error("x".repeat(4_000_000)); }`,
        `function main() { const e: any = new Error("short"); e.name = "N".repeat(4_000_000); throw e; }`,
        `function main() { const e = new Error("short"); e.stack = "s".repeat(4_000_000); throw e; }`,
      ]) {
        const execution = await rig.run(code);
        expect(execution.ok).toBe(false);
        const error = execution.error!;
        const size = error.name.length + error.message.length + (error.stack?.length ?? 0);
        expect(size).toBeLessThanOrEqual(LIMITS.maxResultBytes);
      }
      await rig.expectHostUnchanged();
    });

    test("a flood of non-persistable values does not bypass the result limit through warnings", async () => {
      const execution = await rig.run(
        `function main(moss: Moss) { moss.stash = Array.from({ length: 200_000 }, () => () => 1); }`,
      );
      try {
        // The field over the limit is refused by name (issue 8: per field, not all-or-nothing).
        expect(execution.warnings.join("\n")).toMatch(/moss\.stash/);
        expect(execution.warnings.join("\n").length).toBeLessThanOrEqual(LIMITS.maxResultBytes);
      } finally {
        await rig.run(`function main(moss: Moss) { moss.stash = null; }`);
      }
      await rig.expectHostUnchanged();
    });

    test("a thrown object whose message getter never returns ends with kind timeout", async () => {
      const execution = await rig.run(`function main() { throw { get message(): string { for (;;) {} } }; }`);
      expectFailure(execution, "timeout");
      await rig.expectHostUnchanged();
    });

    test("a huge return value hits the result limit", async () => {
      const execution = await rig.run(`function main() { return "x".repeat(1024 * 1024); }`);
      expectFailure(execution, "output-limit");
      await rig.expectHostUnchanged();
    });

    test("a huge data field is refused by name, keeps its last value and does not poison later executions", async () => {
      await rig.run(`function main(moss: Moss) { moss.notes = ["kept"]; }`);
      const execution = await rig.run(
        `function main(moss: Moss) { moss.notes = Array(100_000).fill("note"); }`,
      );
      try {
        expect(execution.warnings.join("\n")).toMatch(/moss\.notes is larger than the limit/);
        expect(JSON.stringify(execution.context.properties).length).toBeLessThan(LIMITS.maxResultBytes);
        const next = await rig.run(`function main(moss: Moss) { return moss.notes; }`);
        expect(next.returns).toEqual(["kept"]);
        await rig.expectHostUnchanged();
      } finally {
        await rig.run(`function main(moss: Moss) { moss.notes = []; }`);
      }
    });
  });

  describe("tampering with moss and the module's names", () => {
    test("replacing or deleting a service on moss affects neither the host nor the next execute", async () => {
      const execution = await rig.run(`
function main(moss: Moss) {
  const m: any = moss;
  const outcomes: string[] = [];
  const attempt = (action: () => unknown) => {
    try { action(); outcomes.push("done"); } catch (error) { outcomes.push((error as Error).name); }
  };
  const original = m.vault;
  attempt(() => { m.vault = { read: () => "fake" }; });
  attempt(() => { delete m.vault; });
  attempt(() => Object.defineProperty(m, "vault", { value: { read: () => "fake" } }));
  attempt(() => Object.setPrototypeOf(m, { vault: { read: () => "fake" } }));
  return { same: m.vault === original, read: m.vault.read("k"), defineProperty: outcomes[2] };
}`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual({ same: true, read: "value of k", defineProperty: "TypeError" });
      const next = await rig.run(`function main(moss: Moss) { return moss.vault.read("next"); }`);
      expect(next.returns).toBe("value of next");
      await rig.expectHostUnchanged();
    });

    test("redefining moss, a visible function or a global does not stick", async () => {
      const execution = await rig.run(`
var double = (value: number) => 0;
function main() {
  const g: any = globalThis;
  for (const name of ["moss", "double"]) {
    try { g[name] = null; } catch {}
    try { delete g[name]; } catch {}
  }
  return { moss: typeof g.moss.vault.read, double: double(21) };
}`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual({ moss: "function", double: 42 });
      const redefined = await rig.run(`function double(value: number) { return -1; }
function main() { return double(21); }`);
      expect(redefined.returns === 42 || redefined.ok === false).toBe(true);
      await rig.expectHostUnchanged();
    });
  });

  describe("persistence", () => {
    test("a function in a data field is reported by name and never stored", async () => {
      const execution = await rig.run(`function main(moss: Moss) { moss.stash = () => "callback"; }`);
      expect(execution.warnings.join("\n")).toContain("moss.stash");
      expect(JSON.stringify(execution.context.properties.stash ?? null)).not.toContain("callback");
      const reset = await rig.run(`function main(moss: Moss) { moss.stash = null; }`);
      expect(reset.ok).toBe(true);
      await rig.expectHostUnchanged();
    });

    test("a service proxy in a data field is reported by name and never stored", async () => {
      const execution = await rig.run(`function main(moss: Moss) { moss.stash = { vault: moss.vault }; }`);
      expect(execution.warnings.join("\n")).toContain("moss.stash");
      const reset = await rig.run(`function main(moss: Moss) { moss.stash = null; }`);
      expect(reset.ok).toBe(true);
      await rig.expectHostUnchanged();
    });
  });
});

describe("crash containment (process driver only)", () => {
  const rig = new SecurityRig("process");

  beforeAll(async () => {
    await rig.open();
  });

  afterAll(async () => {
    await rig.close();
  });

  test("new Array(1e9).fill(0) kills only its sandbox process (kind memory); the next execute restores persisted data", async () => {
    const saved = await rig.run(
      `function main(moss: Moss) { moss.counter = 7; moss.notes = ["before the crash"]; }`,
    );
    expect(saved.ok).toBe(true);
    const execution = await rig.run(
      `function main(moss: Moss) { moss.counter = 99; new Array(1e9).fill(0); }`,
      { limits: { memoryLimitBytes: 64 * 1024 * 1024, wallTimeMs: 20_000, cpuTimeMs: 20_000 } },
    );
    expect(execution.ok).toBe(false);
    // A V8 out-of-memory abort names its cause (issue 8); it was reported as a crash.
    expect(execution.error?.kind).toBe("memory");
    const after = await rig.run(`function main(moss: Moss) { return [moss.counter, moss.notes]; }`);
    expect(after.returns).toEqual([7, ["before the crash"]]);
    await rig.expectHostUnchanged();
  });
});
