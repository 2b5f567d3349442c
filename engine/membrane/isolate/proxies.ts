// The isolate's proxy of a host handle: a function, a class or an object whose reachable members each make a host
// call; one proxy per handle id, frozen, its shape kept in proxy-shapes.ts.
import { isReachableName } from "../visibility.ts";
import {
  ArrayIsArray,
  FunctionBind,
  MapCtor,
  MapGet,
  MapSet,
  NumberCtor,
  ObjectCreate,
  ObjectFreeze,
  ReflectApply,
  ReflectDefineProperty,
  ReflectDeleteProperty,
  ReflectSetPrototypeOf,
  TypeErrorCtor,
  WeakMapSet,
} from "../wire/intrinsics.ts";
import { callHost } from "./host-calls.ts";
import { shapeOfProxy } from "./proxy-shapes.ts";
import { data, seal } from "./records.ts";
import type { IsolateState } from "./state.ts";

/** The proxy of the handle `shape` describes: made once per handle id, then the same one. */
export function makeProxy(state: IsolateState, shape: any): object {
  const known = ReflectApply(MapGet, state.proxyById, [shape.id]);
  if (known !== undefined) return known;
  const id = NumberCtor(shape.id);
  let target: any;
  if (shape.kind === "function") {
    target = (...args: unknown[]) => callHost(state, "call", id, null, args);
  } else if (shape.kind === "class") {
    const construct = function (this: unknown, ...args: unknown[]) {
      if (new.target === undefined)
        throw new TypeErrorCtor("a host class constructor cannot be invoked without 'new'");
      const instance = callHost(state, "construct", id, null, args);
      if ((typeof instance !== "object" && typeof instance !== "function") || instance === null) {
        throw new TypeErrorCtor("the host constructor did not return an object");
      }
      return instance;
    };
    target = ReflectApply(FunctionBind, construct, [null]);
  } else {
    target = ObjectCreate(null);
  }
  if (typeof target === "function") {
    ReflectDeleteProperty(target, "name");
    ReflectDeleteProperty(target, "length");
    ReflectSetPrototypeOf(target, null);
  }
  defineMembers(state, target, id, shape);
  ObjectFreeze(target);
  ReflectApply(WeakMapSet, shapeOfProxy, [target, shape]);
  ReflectApply(MapSet, state.proxyById, [id, target]);
  return target;
}

/** The shape's reachable methods (batched when declared to return a Promise) and property getters, on `target`. */
function defineMembers(state: IsolateState, target: any, id: number, shape: any): void {
  const methods = ArrayIsArray(shape.methods) ? shape.methods : [];
  const asyncMethods = new MapCtor<unknown, true>();
  const declaredAsync = ArrayIsArray(shape.asyncMethods) ? shape.asyncMethods : [];
  for (let i = 0; i < declaredAsync.length; i++) ReflectApply(MapSet, asyncMethods, [declaredAsync[i], true]);
  for (let i = 0; i < methods.length; i++) {
    const name = methods[i];
    if (!isReachableName(name)) continue;
    const batched = ReflectApply(MapGet, asyncMethods, [name]) === true;
    const method = seal((...args: unknown[]) => callHost(state, "call", id, name, args, batched));
    ReflectDefineProperty(target, name, data(method));
  }
  const properties = ArrayIsArray(shape.properties) ? shape.properties : [];
  for (let i = 0; i < properties.length; i++) {
    const name = properties[i];
    if (!isReachableName(name)) continue;
    const getter = seal(() => callHost(state, "get", id, name, []));
    ReflectDefineProperty(target, name, {
      __proto__: null,
      get: getter,
      enumerable: true,
      configurable: false,
    } as any);
  }
}
