import { describe, expect, test } from "vitest";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { ApprovalRequest, Execution, PolicyCall } from "../../engine/types.ts";
import { compileFromText } from "../helpers/compile-from-text.ts";
import { pendingOf } from "../helpers/durable.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";

/*
 * Issue 24 §5: the line an approval request shows (and the policy's and the trace's `line`) comes from what model
 * code cannot shape. A method named like a frame, a prepareStackTrace of its own, a read-only stackTraceLimit, a
 * subclass of Error, eval'd code that names itself `snippet.js` or an earlier run's function never make
 * `wipe("everything")` appear as the harmless call on line 2: the request shows the true line, or says it is unknown.
 */

const SOURCE = `import { Moss as Base } from "moss-ts";

/** The vault. */
export abstract class Vault {
  /** A harmless look; the number of looks. */
  abstract look(): number;
  /** Empties what it is told to. */
  abstract wipe(what: string): string;
}

export class Moss extends Base {
  vault!: Vault;
}

// <moss-hide>
export class HostVault extends Vault {
  looks = 0;
  wiped: string[] = [];
  look() {
    return ++this.looks;
  }
  wipe(what: string) {
    this.wiped.push(what);
    return "wiped";
  }
}

export function __moss_compile__(compiler: any) {
  compiler.bind(Vault, new HostVault());
}
// </moss-hide>
`;

const runtimes = runtimesClosedAfterAll();

interface Rig {
  runtime: MossRuntime;
  seen: PolicyCall[];
}

async function compile(sandbox: "process" | "in-process"): Promise<Rig> {
  const seen: PolicyCall[] = [];
  const runtime = await compileFromText(
    SOURCE,
    (compiler) => {
      compiler.policy((call) => {
        seen.push(call);
        return call.member === "wipe" ? "ask" : "allow";
      });
    },
    { sandbox, typeCheck: "off", continuationKey: "call-site attacks continuation key, long enough" },
  );
  runtimes.push(runtime);
  return { runtime, seen };
}

/** The wipe's approval request, the line the policy saw for it and the line its trace names. */
function wipeSeen(execution: Execution, seen: PolicyCall[]) {
  const request = pendingOf(execution).requests.find(
    (each): each is ApprovalRequest => each.kind === "approval" && each.member === "wipe",
  );
  expect(request, "the wipe asks for approval").toBeDefined();
  const policy = seen.find((call) => call.member === "wipe");
  const trace = execution.calls.find((call) => call.member === "vault.wipe");
  return { request: request!, policyLine: policy?.line, traceLine: trace?.line };
}

/** The true line everywhere, with that line's code in the request. */
function expectTrueLine(execution: Execution, seen: PolicyCall[], line: number) {
  const { request, policyLine, traceLine } = wipeSeen(execution, seen);
  expect(request.line).toBe(line);
  expect(request.code).toMatch(new RegExp(`> ${line} \\|.*wipe\\("everything"\\)`));
  expect(request.lineUnknown).toBeUndefined();
  expect(policyLine).toBe(line);
  expect(traceLine).toBe(line);
}

describe.each(["in-process", "process"] as const)(
  "model code cannot choose an approval's line (%s driver)",
  (sandbox) => {
    test("a method named like a frame (`snippet.js:2:3`) does not move the wipe to the harmless line", async () => {
      const { runtime, seen } = await compile(sandbox);
      const execution = await runtime.execute({
        code: `function main(moss: Moss) {
  moss.vault.look();
  const spoof: any = { ["snippet.js:2:3"]() { return moss.vault.wipe("everything"); } };
  return spoof["snippet.js:2:3"]();
}`,
      });
      expectTrueLine(execution, seen, 3);
    });

    test("an Error.prepareStackTrace returning a fake frame does not move the wipe", async () => {
      const { runtime, seen } = await compile(sandbox);
      const execution = await runtime.execute({
        code: `function main(moss: Moss) {
  moss.vault.look();
  (Error as any).prepareStackTrace = () => "Error\\n    at main (snippet.js:2:3)";
  (Error as any).captureStackTrace = (target: any) => { target.stack = "Error\\n    at main (snippet.js:2:3)"; };
  return moss.vault.wipe("everything");
}`,
      });
      expectTrueLine(execution, seen, 5);
    });

    test("Error.stackTraceLimit cannot be frozen at 0 (the attempt is refused) and 0 set plainly hides no line", async () => {
      const { runtime, seen } = await compile(sandbox);
      const execution = await runtime.execute({
        code: `function main(moss: Moss) {
  moss.vault.look();
  const refused: string[] = [];
  for (const attempt of [
    () => Object.defineProperty(Error, "stackTraceLimit", { value: 0, writable: false }),
    () => Object.defineProperties(Error, { stackTraceLimit: { value: 0, writable: false } }),
    () => { if (!Reflect.defineProperty(Error, "stackTraceLimit", { value: 0, writable: false })) throw new TypeError("refused"); },
    () => Object.defineProperty(new Proxy(Error, {}), "stackTraceLimit", { value: 0, writable: false }),
    () => Object.freeze(Error),
    () => Object.freeze(new Proxy(new Proxy(Error, {}), {})),
    () => Object.defineProperty(Error, "stackTraceLimit", { get: () => 0 }),
    () => { if (!delete (Error as any).stackTraceLimit) throw new TypeError("refused"); },
  ]) {
    try { attempt(); } catch (error) { refused.push((error as Error).name); }
  }
  (Error as any).stackTraceLimit = 0;
  moss.vault.wipe("everything");
  return refused;
}`,
      });
      expectTrueLine(execution, seen, 17);
    });

    test("a subclass of Error with its own stack hooks, put in Error's place, does not move the wipe", async () => {
      const { runtime, seen } = await compile(sandbox);
      const execution = await runtime.execute({
        code: `function main(moss: Moss) {
  moss.vault.look();
  class Fake extends Error {
    static prepareStackTrace = () => "Error\\n    at main (snippet.js:2:3)";
    static stackTraceLimit = 0;
    static captureStackTrace(target: any) { target.stack = "Error\\n    at main (snippet.js:2:3)"; }
  }
  (globalThis as any).Error = Fake;
  Object.setPrototypeOf(TypeError, Fake);
  return moss.vault.wipe("everything");
}`,
      });
      expectTrueLine(execution, seen, 10);
    });

    test("eval'd code that names itself snippet.js gives the line of the snippet that ran it", async () => {
      const { runtime, seen } = await compile(sandbox);
      const execution = await runtime.execute({
        code: `function main(moss: Moss) {
  moss.vault.look();
  const text = "\\nmoss.vault.wipe(\\"everything\\")\\n//# sourceURL=snippet.js";
  return eval(text);
}`,
      });
      const { request, policyLine, traceLine } = wipeSeen(execution, seen);
      expect([request.line, policyLine, traceLine]).toEqual([4, 4, 4]);
      expect(request.code).toMatch(/> 4 \|.*eval\(text\)/);
    });

    test("an earlier run's function names the line of this run that called it, never its own old line", async () => {
      const { runtime, seen } = await compile(sandbox);
      const first = await runtime.execute({
        code: `function main(moss: Moss) {
  return moss.vault.look();
}
function helper(moss: Moss) {
  return moss.vault.wipe("everything");
}`,
      });
      expect(first.ok).toBe(true);
      const execution = await runtime.execute({
        code: `function main(moss: Moss) {
  const looked = moss.vault.look();
  return [looked, (globalThis as any).helper(moss)];
}
function helper2() {
  return moss.vault.look();
}`,
      });
      const { request, policyLine, traceLine } = wipeSeen(execution, seen);
      expect([request.line, policyLine, traceLine]).toEqual([3, 3, 3]);
    });

    test("a host call made while a stack is formatted has no line: the request says why", async () => {
      const { runtime, seen } = await compile(sandbox);
      const execution = await runtime.execute({
        code: `function main(moss: Moss) {
  moss.vault.look();
  (Error as any).prepareStackTrace = () => { moss.vault.wipe("everything"); return "Error\\n    at main (snippet.js:2:3)"; };
  return new Error("format me").stack;
}`,
      });
      const { request, policyLine, traceLine } = wipeSeen(execution, seen);
      expect(request.line).toBeUndefined();
      expect(request.code).toBeUndefined();
      expect(request.lineUnknown).toMatch(/stack trace was being formatted/);
      expect(policyLine).toBeUndefined();
      expect(traceLine).toBeUndefined();
    });

    test("model code still sets and reads its own prepareStackTrace and stackTraceLimit", async () => {
      const { runtime } = await compile(sandbox);
      const execution = await runtime.execute({
        code: `function main(moss: Moss) {
  const mine = (_error: unknown, frames: any[]) => frames.length;
  (Error as any).prepareStackTrace = mine;
  (Error as any).stackTraceLimit = 1;
  const depth = new Error("x").stack;
  const same = (Error as any).prepareStackTrace === mine;
  (Error as any).prepareStackTrace = undefined;
  moss.vault.look();
  return [depth, same, (Error as any).stackTraceLimit, typeof new Error("y").stack];
}`,
      });
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual([1, true, 1, "string"]);
      expect(execution.calls.map((call) => call.line)).toEqual([8]);
    });
  },
);
