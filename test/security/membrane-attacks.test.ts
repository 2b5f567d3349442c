import { homedir, tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { Execution } from "../../engine/types.ts";
import {
  bodyProbe,
  ConcreteBody,
  ConcreteMatrix,
  files,
  Gadget,
  PRIVATE_FOLDER,
} from "../fixtures/security/membrane-body.ts";
import { writeModule } from "../helpers/compile-from-text.ts";
import { LIMITS } from "./security-harness.ts";

/*
 * Attacks on the membrane: handles offering more than their declared type, and host paths leaking through error
 * text. Every attack runs through the real MossRuntime on both drivers; each asserts the host state is untouched
 * and that no host path appears in anything the model sees.
 */

const MODULE = "test/fixtures/security/membrane-context.ts";

/** Fragments of host paths that must never reach the model. */
const HOST_FRAGMENTS: readonly string[] = [
  PRIVATE_FOLDER,
  "données",
  "privées",
  "sous dossier",
  "Zoë",
  "Müller",
  "Users",
  tmpdir(),
  homedir(),
  process.cwd(),
  path.resolve("test/fixtures/security"),
  "node_modules",
  "file://",
  "membrane-body",
];

/** Everything of an execution the model is shown: returns, stdout, error text and stack, warnings. */
function modelView(execution: Execution): string {
  return JSON.stringify({
    returns: execution.returns,
    stdout: execution.stdout,
    error: execution.error,
    warnings: execution.warnings,
  });
}

function expectNoHostPath(execution: Execution): void {
  const seen = modelView(execution);
  for (const fragment of HOST_FRAGMENTS) expect(seen).not.toContain(fragment);
}

function expectBodyUntouched(): void {
  expect(bodyProbe.wiped).toBe(0);
  expect(bodyProbe.resets).toBe(0);
  expect(bodyProbe.deleted).toBe(0);
}

/** Model code: tries `member` on a value and reports `reached: <result>` or `blocked`. */
const TRY = `
function attempt(value: any, member: string): string {
  try {
    const fn = value?.[member];
    if (typeof fn !== "function") return "blocked: " + typeof fn;
    return "reached: " + String(value[member]());
  } catch (error) {
    return "blocked: " + (error as Error).message;
  }
}
`;

describe.each(["process", "in-process"] as const)("membrane attacks (%s driver)", (driver) => {
  let runtime: MossRuntime;

  beforeAll(async () => {
    runtime = await new MossCompiler({ sandbox: driver, limits: LIMITS })
      .bind("Body", new ConcreteBody())
      .bind("Files", files)
      .withLocals({ gadget: new Gadget() })
      .compile(MODULE);
  });
  afterAll(async () => {
    await runtime?.close();
    await closeSharedSandboxes();
  });
  beforeEach(() => {
    bodyProbe.wiped = 0;
    bodyProbe.resets = 0;
    bodyProbe.deleted = 0;
  });

  const run = (code: string) => runtime.execute({ code: `${TRY}\n${code}`, typeCheck: "off" });

  describe("handles expose the declared type, not the run-time class", () => {
    test("a method declared as returning an interface: the concrete class's extra method is unreachable", async () => {
      const execution = await run(`function main(moss: Moss) {
        const matrix: any = moss.body.matrix();
        matrix.set(1, 2, true);
        return [attempt(matrix, "wipe"), "wipe" in matrix, Object.keys(matrix).includes("wipe"), matrix.width];
      }`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual(["blocked: undefined", false, false, 8]);
      expectBodyUntouched();
      expectNoHostPath(execution);
    });

    test("a fluent method declared as returning this hands out the declared type again, not the class", async () => {
      const execution = await run(`function main(moss: Moss) {
        const again: any = moss.body.matrix().clear();
        return [typeof again.set, typeof again.clear, attempt(again, "wipe")];
      }`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual(["function", "function", "blocked: undefined"]);
      expectBodyUntouched();
    });

    test("a Promise result is typed by its awaited declared type", async () => {
      const execution = await run(`async function main(moss: Moss) {
        const matrix: any = await moss.body.matrixLater();
        return [attempt(matrix, "wipe"), typeof matrix.set];
      }`);
      expect(execution.returns).toEqual(["blocked: undefined", "function"]);
      expectBodyUntouched();
    });

    test("a property read is typed by the property's declared type", async () => {
      const execution = await run(`function main(moss: Moss) {
        const panel: any = moss.body.panel;
        return [attempt(panel, "wipe"), typeof panel.set];
      }`);
      expect(execution.returns).toEqual(["blocked: undefined", "function"]);
      expectBodyUntouched();
    });

    test("arrays, maps and plain records of handles: each item is typed by the declared item type", async () => {
      const execution = await run(`function main(moss: Moss) {
        const out: string[] = [];
        for (const matrix of moss.body.matrices() as any[]) out.push(attempt(matrix, "wipe"));
        for (const matrix of (moss.body.byName() as any).values()) out.push(attempt(matrix, "wipe"));
        out.push(attempt((moss.body.rig() as any).matrix, "wipe"));
        return out;
      }`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual(Array(4).fill("blocked: undefined"));
      expectBodyUntouched();
    });

    test("handles returned by handles are typed by their own declarations, recursively", async () => {
      const execution = await run(`function main(moss: Moss) {
        const sensor: any = moss.body.sensor();
        const display: any = sensor.display();
        return [attempt(sensor, "reset"), attempt(sensor, "wipe"), attempt(display, "wipe"), sensor.read()];
      }`);
      expect(execution.returns).toEqual([
        "blocked: undefined",
        "blocked: undefined",
        "blocked: undefined",
        1,
      ]);
      expectBodyUntouched();
    });

    test("a union exposes only what every alternative declares", async () => {
      const execution = await run(`function main(moss: Moss) {
        const either: any = moss.body.either();
        return [attempt(either, "read"), attempt(either, "reset"), attempt(either, "wipe")];
      }`);
      expect(execution.returns).toEqual(["blocked: undefined", "blocked: undefined", "blocked: undefined"]);
      expectBodyUntouched();
    });

    test("unknown and object results offer nothing beyond plain data (their classes are not shown)", async () => {
      const execution = await run(`function main(moss: Moss) {
        const a: any = moss.body.anything();
        const b: any = moss.body.opaque();
        return [attempt(a, "wipe"), attempt(a, "set"), attempt(b, "reset"), attempt(b, "read")];
      }`);
      expect(execution.returns).toEqual(Array(4).fill("blocked: undefined"));
      expectBodyUntouched();
    });

    test("a returned function is typed by its declared signature: its result is a declared handle too", async () => {
      const execution = await run(`function main(moss: Moss) {
        const make: any = moss.body.factory();
        return attempt(make(), "wipe");
      }`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toBe("blocked: undefined");
      expectBodyUntouched();
    });

    test("a withLocals object: members its class declares private or protected stay unreachable", async () => {
      const execution = await run(`function main(moss: Moss) {
        const g: any = (globalThis as any).gadget ?? gadget;
        return [g.ping(), attempt(g, "selfDestruct"), attempt(g, "tamper")];
      }`);
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual(["pong", "blocked: undefined", "blocked: undefined"]);
      expectBodyUntouched();
    });

    test("a service bound as an object literal: its undeclared method cannot be called", async () => {
      const execution = await run(`function main(moss: Moss) {
        const files: any = moss.files;
        let called = "blocked";
        try { files.secretDelete(); called = "reached"; } catch (error) { called = "blocked: " + (error as Error).message; }
        return called;
      }`);
      expect(execution.returns).not.toBe("reached");
      expectBodyUntouched();
    });
  });

  describe("no host path reaches the model, whatever the folder names", () => {
    test("ENOENT from a folder with spaces and accents keeps the base name and says a path was removed", async () => {
      const execution = await run(`function main(moss: Moss) {
        try { moss.files.read("missing.txt"); return "no error"; }
        catch (error) { return [(error as Error).message, (error as Error).stack, (error as any).path ?? null]; }
      }`);
      expect(execution.error).toBeUndefined();
      const [message] = execution.returns as string[];
      expect(message).toBe("ENOENT: no such file or directory, open '<host path>/missing.txt'");
      expectNoHostPath(execution);
    });

    test("an error's cause is not carried, and its own message is clean", async () => {
      const execution = await run(`function main(moss: Moss) {
        try { moss.files.readWrapped("missing.txt"); return "no error"; }
        catch (error) { return [(error as Error).message, String((error as any).cause), JSON.stringify(error)]; }
      }`);
      expect((execution.returns as string[])[0]).toBe("could not read missing.txt");
      expectNoHostPath(execution);
    });

    test("a Node system error with both path and dest (rename)", async () => {
      const execution = await run(`function main(moss: Moss) {
        try { moss.files.move("a b.txt", "c d.txt"); return "no error"; }
        catch (error) { return (error as Error).message; }
      }`);
      expect(execution.returns).toMatch(/^ENOENT: .*'<host path>\/a b\.txt' -> '<host path>\/c d\.txt'$/);
      expectNoHostPath(execution);
    });

    test("thrown non-Error values: a string and an error-like object with a path", async () => {
      const execution = await run(`function main(moss: Moss) {
        const out: string[] = [];
        try { moss.files.throwString(); } catch (error) { out.push(String((error as Error).message ?? error)); }
        try { moss.files.throwObject(); } catch (error) { out.push((error as Error).message); }
        return out;
      }`);
      expect(execution.returns).toEqual([
        "failed at <host path>/thrown.txt",
        "object failure at <host path>/object.txt",
      ]);
      expectNoHostPath(execution);
    });

    test("an AggregateError's list of errors does not cross", async () => {
      const execution = await run(`async function main(moss: Moss) {
        try { await moss.files.throwAggregate(); return "no error"; }
        catch (error) { return [(error as Error).name, (error as Error).message, JSON.stringify((error as any).errors ?? null)]; }
      }`);
      expect(execution.returns).toEqual(["AggregateError", "several failed", "null"]);
      expectNoHostPath(execution);
    });

    test("a host stack inside a message loses its frames; file:// URLs and Windows paths are removed whole", async () => {
      const execution = await run(`function main(moss: Moss) {
        const out: string[] = [];
        for (const name of ["throwStack", "throwUrl", "throwWindows"]) {
          try { (moss.files as any)[name](); } catch (error) { out.push((error as Error).message + "|" + (error as Error).stack); }
        }
        return out;
      }`);
      const [stack, url, windows] = execution.returns as string[];
      const [message, stackText] = stack!.split("|");
      expect(message).toBe("failed:\nError: inner");
      // Frames the model may see name only its snippet and the sandbox bootstrap, never a host file.
      for (const frame of stackText!.split("\n").filter((line) => line.trim().startsWith("at "))) {
        expect(frame).toMatch(/\((?:snippet|moss-sandbox-bootstrap)\.js:\d+:\d+\)$/);
      }
      expect(url).toContain("cannot load <host path>/mod ule.js");
      expect(windows).toContain("cannot open <host path>/secret.txt now");
      expectNoHostPath(execution);
    });

    test("an uncaught host error: the execution's error message and stack carry no host path", async () => {
      const execution = await run(`function main(moss: Moss) { moss.files.read("gone.txt"); }`);
      expect(execution.ok).toBe(false);
      expect(execution.error?.message).toContain("<host path>/gone.txt");
      expectNoHostPath(execution);
    });

    test("an Error returned as a value (not thrown) is cleaned too", async () => {
      const execution = await run(`function main(moss: Moss) {
        const error = moss.files.lastError();
        console.log(error.message);
        return error.message;
      }`);
      expect(execution.returns).toBe("last failure at <host path>/last.txt");
      expectNoHostPath(execution);
    });

    test("printing and returning every caught host error leaks nothing through stdout either", async () => {
      const execution = await run(`async function main(moss: Moss) {
        const calls: Array<() => unknown> = [
          () => moss.files.read("x y.txt"), () => moss.files.readWrapped("z.txt"), () => moss.files.move("p", "q"),
          () => moss.files.throwString(), () => moss.files.throwObject(), () => moss.files.throwAggregate(),
          () => moss.files.throwStack(), () => moss.files.throwUrl(), () => moss.files.throwWindows(),
        ];
        for (const call of calls) {
          try { await call(); } catch (error) { console.log(String(error), (error as Error).stack, error); }
        }
        throw new Error("done");
      }`);
      expect(execution.stdout.length).toBeGreaterThan(0);
      expectNoHostPath(execution);
    });
  });
});

describe.each(["process", "in-process"] as const)(
  "undeclared results and the classes a module shows (%s driver)",
  (driver) => {
    // The module shows ConcreteMatrix itself (a value import), so an `unknown` result that is one offers
    // ConcreteMatrix's public members; a subclass adds nothing, and an unshown class offers nothing.
    const SOURCE = `import { Moss as Parent } from "moss-ts";
import type { Body } from "../security/membrane-body.ts";
// biome-ignore lint/style/useImportType: shown as a value
import { ConcreteMatrix } from "../security/membrane-body.ts";
export class Moss extends Parent { body!: Body; }
export const shown = ConcreteMatrix;
`;
    class Subclass extends ConcreteMatrix {
      selfDestruct(): string {
        bodyProbe.wiped += 100;
        return "boom";
      }
    }
    let runtime: MossRuntime;

    beforeAll(async () => {
      const body = new ConcreteBody();
      let next = 0;
      body.anything = () => (next++ % 2 === 0 ? new ConcreteMatrix() : new Subclass());
      const file = await writeModule(SOURCE, "shown-class");
      runtime = await new MossCompiler({ sandbox: driver, limits: LIMITS }).bind("Body", body).compile(file);
    });
    afterAll(async () => {
      await runtime?.close();
      await closeSharedSandboxes();
    });

    test("the nearest shown class lends its declared members, never the run-time subclass's", async () => {
      bodyProbe.wiped = 0;
      const execution = await runtime.execute({
        typeCheck: "off",
        code: `${TRY}
      function main(moss: Moss) {
        const plain: any = moss.body.anything();
        const sub: any = moss.body.anything();
        return [attempt(plain, "wipe"), attempt(sub, "wipe"), attempt(sub, "selfDestruct")];
      }`,
      });
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toEqual(["reached: wiped", "reached: wiped", "blocked: undefined"]);
      expect(bodyProbe.wiped).toBe(2);
      expectNoHostPath(execution);
    });
  },
);
