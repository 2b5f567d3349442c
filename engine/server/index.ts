// The multi-user server (`moss serve`) in three rooms over one protocol: `http/` (the API, AG-UI, the playground),
// `store/` (the database and every rule about threads, runs, events and answers), `worker/` (runs claimed and run);
// `protocol.ts` is the shapes they share with moss-ts/client (types only); `moss-server.ts` puts them together.
// The server reads no config file: `moss serve` (engine/cli/) resolves its settings and hands it plain options.
// Every export is named here.

export { DEFAULT_HTTP_TIMEOUTS, type HttpTimeouts } from "./http/index.ts";
export {
  type MossServer,
  type MossServerOptions,
  type ServerAgentOptions,
  startMossServer,
} from "./moss-server.ts";
export { createServerLogger } from "./server-log.ts";
export {
  type Database,
  DatabaseContextStore,
  DatabaseConversationStore,
  type DatabaseLocation,
  openDatabase,
  redactUrl,
} from "./store/index.ts";
export { TenantTokens } from "./tenant-tokens.ts";
