import path from "node:path";
import { Worker } from "node:worker_threads";
import { afterAll, afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { liveCheckerWorkers } from "../../engine/check/index.ts";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";

/*
 * With the type-check off nothing of the checker runs: no type-check worker starts and none is sent a message (an
 * executed snippet's definitions are kept on the host and reach a checker only with the next check that needs them).
 * Real workers: every message the host posts to a worker thread is counted.
 */

const CONTEXT_FILE = path.relative(process.cwd(), path.resolve("test/fixtures/check/moss-names-context.ts"));
const DEFINE =
  "function triple(value: number): number { return value * 3; }\nfunction main(moss: Moss) { return triple(moss.count + 1); }";
const USE = "function main(moss: Moss) { return triple(2); }";

let posted: Array<{ type?: unknown }> = [];
beforeEach(() => {
  posted = [];
  const postMessage = Worker.prototype.postMessage;
  vi.spyOn(Worker.prototype, "postMessage").mockImplementation(function (this: Worker, message, transfer) {
    posted.push(message as { type?: unknown });
    return postMessage.call(this, message, transfer);
  });
});
afterEach(() => {
  vi.restoreAllMocks();
});
afterAll(async () => {
  await closeSharedSandboxes();
});

const checkerMessages = (): unknown[] =>
  posted
    .map((message) => message?.type)
    .filter((type) => type === "accept" || type === "define" || type === "check" || type === "start");

describe.each(["in-process", "process"] as const)("%s driver", (sandbox) => {
  test("a runtime whose check is off starts no checker and posts it nothing", async () => {
    const runtime = await new MossCompiler({ sandbox, typeCheck: "off" }).compile(CONTEXT_FILE);
    try {
      for (let turn = 0; turn < 3; turn++) {
        const execution = await runtime.execute({ code: DEFINE });
        expect(execution.error, JSON.stringify(execution.error)).toBeUndefined();
        expect(execution.returns).toBe(3);
      }
      expect(checkerMessages()).toEqual([]);
      // (esbuild runs a worker thread of its own: only type-check workers, spare included, are counted.)
      expect(liveCheckerWorkers(), "type-check workers").toBe(0);
    } finally {
      await runtime.close();
    }
  });

  test("executes with the check off post nothing; the next checked execute still sees their definitions", async () => {
    let runtime: MossRuntime | undefined;
    try {
      runtime = await new MossCompiler({ sandbox, typeCheck: "strict" }).compile(CONTEXT_FILE);
      // The module's checker is up and has checked once …
      const first = await runtime.execute({ code: "function main(moss: Moss) { return moss.count; }" });
      expect(first.returns).toBe(0);
      expect(liveCheckerWorkers()).toBe(1);
      posted = [];
      for (let turn = 0; turn < 3; turn++) {
        const execution = await runtime.execute({ code: DEFINE, typeCheck: "off" });
        expect(execution.returns).toBe(3);
      }
      // … but executes that are not checked send it nothing.
      expect(checkerMessages()).toEqual([]);
      const checked = await runtime.execute({ code: USE });
      expect(checked.error, JSON.stringify(checked.error)).toBeUndefined();
      expect(checked.returns).toBe(6);
      // The definitions went with the check that needed them, as the session's one record of its definitions.
      expect(checkerMessages().filter((type) => type === "define").length).toBeGreaterThan(0);
      const wrong = await runtime.execute({ code: "function main(moss: Moss) { return triple('x'); }" });
      expect(wrong.error?.kind).toBe("type");
    } finally {
      await runtime?.close();
    }
  });
});
