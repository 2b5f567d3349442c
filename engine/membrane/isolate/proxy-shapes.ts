// The handle shape each host proxy was built from. Module state is per isolate: the script is evaluated once in each.
import { WeakMapCtor } from "../wire/intrinsics.ts";

export const shapeOfProxy = new WeakMapCtor<object, any>();
