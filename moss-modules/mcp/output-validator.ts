import { Worker } from "node:worker_threads";
import { runnableEntryAsync } from "../../engine/runnable-entry.ts";
import type { ValidationReply, ValidationRequest } from "./output-validation-worker.ts";

const WORKER_ENTRY = new URL(
  import.meta.url.endsWith(".ts") ? "./output-validation-worker.ts" : "./output-validation-worker.js",
  import.meta.url,
);

/** Heap of the validation worker: a result is at most `maxResponseBytes`; the schema's work is what is bounded. */
const WORKER_HEAP_MB = 256;

/**
 * Validates tool results against their `outputSchema` in a worker thread with a time limit: a server's schema is
 * untrusted (a catastrophic `pattern`, `uniqueItems` over a large array), so its work never runs on the host's
 * thread. A validation past the limit ends the worker (a new one starts for the next) and rejects.
 */
export class OutputValidator {
  readonly #timeoutMs: number;
  #worker: Worker | undefined;
  #nextId = 1;

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
  }

  /** Resolves when `value` fits `schema`; rejects with a message naming `label` and the cause otherwise. */
  async validate(schema: object, value: unknown, label: string): Promise<void> {
    const worker = await this.#start();
    const id = this.#nextId++;
    const reply = await new Promise<ValidationReply | "timeout" | "stopped">((resolve) => {
      const finish = (result: ValidationReply | "timeout" | "stopped"): void => {
        clearTimeout(timer);
        worker.off("message", onMessage);
        worker.off("exit", onExit);
        worker.off("error", onExit);
        worker.unref();
        resolve(result);
      };
      const onMessage = (message: ValidationReply): void => {
        if (message.id === id) finish(message);
      };
      const onExit = (): void => finish("stopped");
      const timer = setTimeout(() => finish("timeout"), this.#timeoutMs);
      worker.on("message", onMessage);
      worker.on("exit", onExit);
      worker.on("error", onExit);
      worker.ref();
      worker.postMessage({ id, schema, value } satisfies ValidationRequest);
    });
    if (reply === "timeout" || reply === "stopped") {
      this.#end();
      throw new Error(
        reply === "timeout"
          ? `${label}: validating the result against the tool's outputSchema took longer than ${this.#timeoutMs} ms (the server's schema is too costly); the result was not used`
          : `${label}: validating the result against the tool's outputSchema failed (the validator stopped); the result was not used`,
      );
    }
    if (reply.failed !== undefined)
      throw new Error(`${label}: the tool's outputSchema cannot be used: ${reply.failed}`);
    if (reply.error !== undefined)
      throw new Error(`${label}: the result does not match the tool's outputSchema: ${reply.error}`);
  }

  /** Ends the worker, if one runs. */
  close(): void {
    this.#end();
  }

  async #start(): Promise<Worker> {
    if (this.#worker) return this.#worker;
    const entry = await runnableEntryAsync(WORKER_ENTRY);
    if (this.#worker) return this.#worker;
    const worker = new Worker(entry, {
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
      stdout: true,
      stderr: true,
    });
    worker.unref();
    worker.on("error", () => {});
    worker.once("exit", () => {
      if (this.#worker === worker) this.#worker = undefined;
    });
    this.#worker = worker;
    return worker;
  }

  #end(): void {
    const worker = this.#worker;
    this.#worker = undefined;
    void worker?.terminate();
  }
}
