import type { HostMembrane, HostOperation, HostOutcome } from "../protocol.ts";
import { hostErrorWire } from "./host-error.ts";

/** Dispatches one proxy access to the membrane; a membrane that throws becomes an error outcome. */
export function callMembrane(
  membrane: HostMembrane,
  operation: HostOperation,
  handle: number,
  member: string | null,
  args: string,
  given = 0,
  nondeterminism?: string,
): HostOutcome {
  // The line comes from the isolate (or a sandbox process): only a plain line number is passed on.
  const line = Number.isSafeInteger(given) && given > 0 ? given : 0;
  try {
    if (typeof nondeterminism === "string" && nondeterminism !== "") membrane.readValues?.(nondeterminism);
    if (operation === "construct") return membrane.construct(handle, args, line);
    if (operation === "get") return membrane.get(handle, member ?? "", line);
    if (operation === "ask") {
      if (membrane.ask === undefined) throw new TypeError("moss.ask is not available in this run");
      return membrane.ask(args, line);
    }
    if (operation === "show") {
      if (membrane.show === undefined) throw new TypeError("moss.show is not available in this run");
      return membrane.show(args, line);
    }
    return membrane.call(handle, member, args, line);
  } catch (error) {
    return { kind: "error", wire: hostErrorWire(error) };
  }
}

/** Wire text of `{ name, message }` for a host-side failure: host paths removed, never its stack. */
export function errorWire(error: unknown): string {
  return hostErrorWire(error);
}
