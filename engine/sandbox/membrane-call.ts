import { hostErrorWire } from "./host-error.ts";
import type { HostMembrane, HostOutcome } from "./sandbox.ts";

/** The membrane operations a proxy inside the isolate can request. */
export type HostOperation = "call" | "construct" | "get";

/** Dispatches one proxy access to the membrane; a membrane that throws becomes an error outcome. */
export function callMembrane(
  membrane: HostMembrane,
  operation: HostOperation,
  handle: number,
  member: string | null,
  args: string,
): HostOutcome {
  try {
    if (operation === "construct") return membrane.construct(handle, args);
    if (operation === "get") return membrane.get(handle, member ?? "");
    return membrane.call(handle, member, args);
  } catch (error) {
    return { kind: "error", wire: hostErrorWire(error) };
  }
}

/** Wire text of `{ name, message }` for a host-side failure: host paths removed, never its stack. */
export function errorWire(error: unknown): string {
  return hostErrorWire(error);
}
