// The globals the isolate takes away or replaces before model code runs: what escapes its limits, and `Proxy`.
import {
  ArrayBufferCtor,
  ProxyCtor,
  ProxyRevocable,
  ReflectApply,
  ReflectConstruct,
  ReflectDefineProperty,
  ReflectDeleteProperty,
  WeakSetAdd,
  WeakSetCtor,
  WeakSetHas,
} from "../wire/intrinsics.ts";
import { noteProxyTarget } from "./call-site.ts";
import { builtin } from "./records.ts";

/**
 * WebAssembly memory and SharedArrayBuffer escape memoryLimit; Atomics.waitAsync, FinalizationRegistry and WeakRef
 * let model code schedule work the host would run after its run is over.
 */
export function removeEscapes(global: any): void {
  for (const name of ["WebAssembly", "SharedArrayBuffer", "Atomics", "FinalizationRegistry", "WeakRef"]) {
    ReflectDeleteProperty(global, name);
  }
}

/**
 * Growing a resizable ArrayBuffer commits memory that the isolate's memoryLimit does not count, and only Node 20
 * accepts --no-harmony-rab-gsab (never the in-process host): every buffer is fixed-size on every Node line. The
 * constructor drops its options argument (`{ maxByteLength }`), and nothing can resize or transfer a buffer.
 */
export function fixArrayBuffers(global: any): void {
  for (const name of ["resize", "transfer", "transferToFixedLength"]) {
    ReflectDeleteProperty(ArrayBufferCtor.prototype, name);
  }
  const FixedArrayBuffer = new ProxyCtor(ArrayBufferCtor, {
    __proto__: null,
    construct: (target: Function, args: unknown[], newTarget: Function) =>
      ReflectConstruct(target, [args[0]], newTarget),
  } as ProxyHandler<ArrayBufferConstructor>);
  ReflectDefineProperty(ArrayBufferCtor.prototype, "constructor", builtin(FixedArrayBuffer));
  ReflectDefineProperty(global, "ArrayBuffer", builtin(FixedArrayBuffer));
}

// Module state is per isolate: the script is evaluated once in each.
const modelProxies = new WeakSetCtor<object>();

/** Whether model code made the value with `Proxy` (or `Proxy.revocable`). */
export function isModelProxy(value: object): boolean {
  return ReflectApply(WeakSetHas, modelProxies, [value]) as boolean;
}

/**
 * Every Proxy model code makes is known: the data snapshot and the result never read one (its traps would run
 * model code while the session's data are saved, and could change a field already taken). `Proxy` becomes a
 * forwarding proxy of itself whose construct registers what it makes; `Proxy.revocable` registers too. No other
 * way to make a Proxy is left: the original constructor is reachable only through the captured intrinsics.
 */
export function trackModelProxies(global: any): void {
  ReflectDefineProperty(
    ProxyCtor,
    "revocable",
    builtin(function revocable(target: object, handler: ProxyHandler<object>) {
      const made = ProxyRevocable(target, handler);
      ReflectApply(WeakSetAdd, modelProxies, [made.proxy]);
      noteProxyTarget(made.proxy, target);
      return made;
    }),
  );
  ReflectDefineProperty(
    global,
    "Proxy",
    builtin(
      new ProxyCtor(ProxyCtor, {
        __proto__: null,
        construct: (target: Function, args: unknown[], _newTarget: Function) => {
          const made = ReflectConstruct(target, args);
          ReflectApply(WeakSetAdd, modelProxies, [made]);
          noteProxyTarget(made, args[0]);
          return made;
        },
      } as ProxyHandler<ProxyConstructor>),
    ),
  );
}
