// The handle shape each host proxy was built from. Module state is per isolate: the script is evaluated once in each.
import { ReflectApply, WeakMapCtor, WeakMapGet } from "../wire/intrinsics.ts";

export const shapeOfProxy = new WeakMapCtor<object, any>();

/** The handle shape of a host proxy, undefined for any other value. */
export function knownHandle(value: object): any {
  return ReflectApply(WeakMapGet, shapeOfProxy, [value]);
}
