// The sandbox front door: drivers, the driver factory and the wire codec.
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
