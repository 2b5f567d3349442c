// The server's worker: claims queued runs (and runs whose worker was lost) from the store, runs each with a thread
// agent under a lease it renews, stores every event before anyone can read it, and records how the run ended.
export { type CreateThreadAgent, RunWorker, type RunWorkerOptions } from "./run-worker.ts";
