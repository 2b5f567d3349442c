import "../wire/intrinsics.ts";
import type { HostBatchBridge, HostCallBridge } from "../protocol.ts";
import { createWireCodec } from "../wire/codec.ts";
import { type SandboxEntryPoints, sandboxBootstrap } from "./bootstrap.ts";

/*
 * The entry of the isolate script: esbuild bundles this file and what it imports into one self-contained classic
 * script (membrane/isolate-script.ts). Nothing here runs on the host.
 */

/** The codec as the isolate runs it (tests use it from another realm). */
export { createWireCodec };

/** Installs the isolate half with the host's bridges and returns the entry points the host drives. */
export function start(
  hostCall: HostCallBridge,
  emit: (text: string) => void,
  done: (envelope: string) => void,
  hostCalls: HostBatchBridge,
): SandboxEntryPoints {
  return sandboxBootstrap(createWireCodec(), hostCall, emit, done, hostCalls);
}
