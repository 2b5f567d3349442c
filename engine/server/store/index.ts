// The server's store: the database (PGlite on its own thread, or PostgreSQL) and its migrations, and each job the
// server keeps in it (threads, runs, the run queue and its leases, the event log, answers), held by one
// ServerStore; the context and conversation stores of the agents; the hub that wakes event streams.
export type { StoredResponse } from "./answer-store.ts";
export {
  type Database,
  type DatabaseLocation,
  openDatabase,
  redactUrl,
  type SqlExecutor,
} from "./database.ts";
export { DatabaseContextStore, DatabaseConversationStore } from "./database-stores.ts";
export { EventHub } from "./event-hub.ts";
export { type EventInput, runStatusEvent, type StoredEvent, wireJson } from "./event-log.ts";
export type { ClaimedRun, ClaimFairness, LeaseState } from "./run-queue.ts";
export { ServerStore } from "./server-store.ts";
export { CHANNELS, runNotFound, sessionIdOf, threadNotFound } from "./store-rows.ts";
