// The server's HTTP face: the native API v1 as one Hono sub-app per resource (threads, runs, answers, events), the
// AG-UI route (`agui/`) and the playground page with its files (`playground/`), over the checks every request
// passes (token, text, body size) and the Node HTTP server's timeouts.

export { DEFAULT_HTTP_TIMEOUTS, type HttpTimeouts } from "../../server-defaults.ts";
export { streamHeldBytes } from "./follow-thread-events.ts";
export { answerClientErrors, httpServerOptions } from "./http-timeouts.ts";
export {
  createServerApp,
  type ServerApp,
  type ServerAppOptions,
  type TenantLimits,
} from "./server-app.ts";
