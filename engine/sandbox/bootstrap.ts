import { isolateClosureSource } from "../membrane/index.ts";

/**
 * The isolate half of the membrane as the body of an `evalClosure` taking `$0` = the host-call bridge (a synchronous
 * callback), `$1` = the emit bridge (stdout text) and `$2` = the done bridge (receives each run's envelope): the
 * bundled isolate script (membrane/isolate/), built once per process.
 */
export function bootstrapSource(): string {
  return isolateClosureSource();
}

export { type SandboxEnvelope, stdoutTruncationMarker } from "../membrane/index.ts";
