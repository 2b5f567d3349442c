// The multi-user server: threads, runs, workers and their database. Every export is named here.

export { type Database, type DatabaseLocation, openDatabase } from "./database.ts";
export { DatabaseContextStore, DatabaseConversationStore } from "./database-stores.ts";
export { DEFAULT_HTTP_TIMEOUTS, type HttpTimeouts } from "./http-timeouts.ts";
export {
  type MossServer,
  type MossServerOptions,
  type ServerAgentOptions,
  startMossServer,
} from "./moss-server.ts";
export { TenantTokens } from "./tenant-tokens.ts";
