// The worker thread that type-checks the model's code for the WorkerModuleCheckers of one module: one warm ModuleChecker
// shared by their sessions (each session's accepted definitions kept apart by owner), driven by
// messages, inside the heap limit its parent set. Checking is model-controlled work: it never runs on the host's
// main thread.
import { parentPort, workerData } from "node:worker_threads";
import type { ModuleChecker, ModuleCheckerOptions } from "./module-checker.ts";

/** What the worker starts from. */
export interface CheckWorkerData {
  options: Omit<ModuleCheckerOptions, "project">;
  /** Each session's snippets that ran before this worker started, in order: their definitions are visible to its checks. */
  accepted: Array<[owner: string, snippets: string[]]>;
}

/** What a spare worker starts from: nothing of a module yet (it loads TypeScript and its lib, then waits). */
export interface SpareCheckWorkerData {
  spare: true;
}

/** A worker's `workerData`: the checker's file (check-worker-boot.ts imports it) and what the checker starts from. */
export interface CheckWorkerBootData {
  /** The URL of this file (or its bundle), imported once TypeScript's code cache is in place. */
  checker: string;
  data: CheckWorkerData | SpareCheckWorkerData;
}

/** A message from the host. */
export type CheckWorkerRequest =
  | { type: "start"; data: CheckWorkerData }
  | { type: "check"; id: number; owner: string; snippet: string }
  | { type: "accept"; owner: string; snippet: string }
  | { type: "define"; owner: string; definitions: string }
  | { type: "forget"; owner: string }
  | { type: "updateSource"; source: string }
  | { type: "dispose" };

/** A message to the host. */
export type CheckWorkerReply =
  | { type: "ready" }
  | { type: "warmed" }
  | { type: "checked"; id: number; diagnostics: ReturnType<ModuleChecker["check"]> }
  | { type: "failed"; id?: number; message: string };

const port = parentPort;
if (port) {
  // TypeScript is already loaded from V8's code cache (check-worker-boot.ts, the worker's first module).
  const { ModuleChecker, warmCheckLibrary } = await import("./module-checker.ts");
  // The host never reads this worker's stdio (reading it would keep the host process alive), so nothing the
  // checker or a library prints may be written there.
  process.stdout.write = () => true;
  process.stderr.write = () => true;
  const send = (reply: CheckWorkerReply): void => port.postMessage(reply);
  let checker: ModuleChecker | undefined;
  const start = (data: CheckWorkerData): void => {
    try {
      checker = new ModuleChecker(data.options);
      for (const [owner, snippets] of data.accepted)
        for (const snippet of snippets) checker.accept(snippet, owner);
      // Builds the program (lib, the module and its imports) before the first check's time limit starts.
      checker.check("");
      send({ type: "ready" });
    } catch (error) {
      send({ type: "failed", message: error instanceof Error ? error.message : String(error) });
    }
  };
  const given = (workerData as CheckWorkerBootData).data;
  if ("spare" in given) {
    // A spare: TypeScript's lib is parsed and bound, and the checker's code compiled, before a module needs it.
    try {
      warmCheckLibrary();
    } catch {
      // The module's own start reports any real failure.
    }
    send({ type: "warmed" });
  } else start(given);
  port.on("message", (request: CheckWorkerRequest) => {
    if (request.type === "start") {
      if (!checker) start(request.data);
      return;
    }
    if (!checker) return;
    try {
      if (request.type === "check") {
        send({ type: "checked", id: request.id, diagnostics: checker.check(request.snippet, request.owner) });
      } else if (request.type === "accept") {
        checker.accept(request.snippet, request.owner);
      } else if (request.type === "define") {
        checker.define(request.definitions, request.owner);
      } else if (request.type === "forget") {
        checker.forget(request.owner);
      } else if (request.type === "updateSource") {
        checker.updateSource(request.source);
      } else if (request.type === "dispose") {
        checker.dispose();
      }
    } catch (error) {
      send({
        type: "failed",
        ...(request.type === "check" ? { id: request.id } : {}),
        message: error instanceof Error ? error.message : String(error),
      });
    }
  });
}
