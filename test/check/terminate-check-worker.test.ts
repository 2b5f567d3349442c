import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { terminateCheckWorker } from "../../engine/check/check-worker-start.ts";

/*
 * Ending a type-check worker must not hold the process open: Node's `terminate()` references the worker again until
 * its thread is gone (tens of ms for a checker's heap), so a CLI command that closed its runtime waited for it before
 * exiting. The test counts the process's active resources: a plain terminate() adds one (a MessagePort).
 */
describe("terminateCheckWorker", () => {
  it("ends the worker without keeping the process alive meanwhile", async () => {
    const worker = new Worker(
      "require('node:worker_threads').parentPort.postMessage('ready'); setInterval(() => {}, 1000);",
      { eval: true },
    );
    await new Promise((resolve) => worker.once("message", resolve));
    worker.unref();
    const count = (kind: string) => process.getActiveResourcesInfo().filter((name) => name === kind).length;
    const before = count("MessagePort");
    const exited = new Promise<number>((resolve) => worker.once("exit", resolve));
    const ended = terminateCheckWorker(worker);
    expect(count("MessagePort")).toBe(before);
    await ended;
    expect(await exited).toBe(1);
  });
});
