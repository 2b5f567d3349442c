// The multi-user server: threads, runs, workers and their database. Every export is named here.

export { DEFAULT_HTTP_TIMEOUTS, type HttpTimeouts } from "./http/http-timeouts.ts";
export { CONFIG_FILE, type ConfigValue, loadMossConfig, MossConfig, renderConfig } from "./moss-config.ts";
export {
  type MossServer,
  type MossServerOptions,
  type ServerAgentOptions,
  startMossServer,
} from "./moss-server.ts";
export { type Database, type DatabaseLocation, openDatabase } from "./store/database.ts";
export { DatabaseContextStore, DatabaseConversationStore } from "./store/database-stores.ts";
export { TenantTokens } from "./tenant-tokens.ts";
