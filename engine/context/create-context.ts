import type { MossContext } from "../types.ts";
import { contextVersion } from "./wire-properties.ts";

/** A fresh MossContext for a module; `properties` are already encoded (see `encodeProperties`). */
export function createContext(module: string, properties: Record<string, unknown> = {}): MossContext {
  return { version: contextVersion(properties), module, properties: { ...properties }, executed: false };
}

/**
 * Joins two contexts: the right side wins per property and for each scalar (`code`, `executeCode`, `executed`)
 * it defines; `module` comes from the right. Fields outside the protocol are kept, right winning.
 * A property cannot be deleted by a join: absent on the right means "unchanged". The version is what the joined
 * properties need (2 once one is a wire document).
 */
export function joinContexts(left: MossContext, right: MossContext): MossContext {
  const properties = { ...left.properties, ...right.properties };
  const joined: MossContext = {
    ...left,
    ...right,
    version: contextVersion(properties),
    module: right.module,
    properties,
    executed: right.executed ?? left.executed,
  };
  const code = right.code ?? left.code;
  const executeCode = right.executeCode ?? left.executeCode;
  if (code === undefined) delete joined.code;
  else joined.code = code;
  if (executeCode === undefined) delete joined.executeCode;
  else joined.executeCode = executeCode;
  return joined;
}
