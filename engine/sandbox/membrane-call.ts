import type { HostMembrane, HostOutcome } from "./sandbox.ts";
import { encodeWire } from "./wire.ts";

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
    return { kind: "error", wire: errorWire(error) };
  }
}

/** Wire text of `{ name, message }` for a host-side failure (never its stack). */
export function errorWire(error: unknown): string {
  const name = error instanceof Error ? error.name : "Error";
  const message = error instanceof Error ? error.message : String(error);
  return encodeWire({ name, message });
}
