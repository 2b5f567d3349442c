/*
 * The sandbox: where model code runs, one isolate and context per session, within its limits, with host calls
 * crossing to the membrane of this process. The contract is `sandbox.ts`; two drivers implement it:
 * - in process (`in-process-driver.ts`): isolates on isolated-vm's thread, no crash containment;
 * - in a supervised pool of sandbox processes (`process-driver.ts`: the pool, placement and spares;
 *   `process-session.ts`: a session there; `sandbox-child.ts`: one process, its run queue and supervision, with
 *   `call-pipe.ts` answering its host calls on fd 4, `child-death.ts` naming its death and `sandbox-entry.ts` starting
 *   it; `sandbox-process.ts` is the process's own entry, over `line-channel.ts`).
 * Both run `isolate-session.ts` (one isolate: `bootstrap-entry.ts` installs the isolate half, `active-run.ts` holds a
 * run's state, `run-result.ts` bounds its result), kept warm by `warm-isolates.ts`.
 * This front door: the drivers, the driver factory and the wire codec.
 */
import { InProcessDriver, type InProcessDriverOptions } from "./in-process-driver.ts";
import { ProcessDriver, type ProcessDriverOptions } from "./process-driver.ts";
import type { SandboxDriver } from "./sandbox.ts";

export {
  createWireCodec,
  DEFAULT_MAX_EXPANDED_BYTES,
  type DecodeWireOptions,
  decodeWire,
  describeUnsupported,
  type EncodeWireFieldsOptions,
  type EncodeWireOptions,
  encodeWire,
  encodeWireFields,
  measureWire,
  WIRE_MAX_BIGINT_DIGITS,
  WIRE_MAX_DEPTH,
  type WireUnsupported,
} from "../membrane/index.ts";
export { abortedResult } from "./crash-result.ts";
export { InProcessDriver, type InProcessDriverOptions } from "./in-process-driver.ts";
export { loadIsolatedVm } from "./isolated-vm.ts";
export { ProcessDriver, type ProcessDriverOptions } from "./process-driver.ts";
export type {
  HandleShape,
  HostMembrane,
  HostOutcome,
  Nondeterminism,
  SandboxDriver,
  SandboxRunRequest,
  SandboxRunResult,
  SandboxSession,
  SessionSetup,
} from "./sandbox.ts";

/** Creates a sandbox driver of the given kind: "process" (the default, crash-contained) or "in-process". */
export function createSandboxDriver(
  kind: SandboxDriver["name"] = "process",
  options: ProcessDriverOptions & InProcessDriverOptions = {},
): SandboxDriver {
  return kind === "in-process" ? new InProcessDriver(options) : new ProcessDriver(options);
}
