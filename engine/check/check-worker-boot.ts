// A type-check worker's first module: TypeScript is loaded from V8's code cache (the CLI's main thread keeps it)
// before the checker is imported. The checker is a file of its own: run from moss-ts's sources, each worker file is
// one bundle, and a bundle's static import of ts-morph (external) is evaluated before any of the bundle's own code,
// so a cache put in place inside the checker's bundle came too late and every worker compiled TypeScript again.
import { workerData } from "node:worker_threads";
import { enableCodeCache } from "../enable-code-cache.ts";
import type { CheckWorkerBootData } from "./check-worker.ts";

enableCodeCache();
await import((workerData as CheckWorkerBootData).checker);
