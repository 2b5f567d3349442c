// The comparison engines of the runtime benchmark, running the same (already compiled) JavaScript with the same
// service: node:vm (no isolation worth the name: the unsafe lower bound) and quickjs-emscripten.
import vm from "node:vm";
import { getQuickJS, type QuickJSHandle, type QuickJSWASMModule } from "quickjs-emscripten";
import { Ledger } from "./fixtures/ledger.ts";

/** A place to run the snippet's JavaScript against a `moss` with a `ledger` service and a `records` data field. */
export interface BaselineEngine {
  /** Runs `main(moss)` (awaited) and snapshots `moss.records` out, as the runtime persists data fields. */
  execute(script: string): Promise<unknown>;
  dispose(): void;
}

/** node:vm: a context holding the real `Ledger` (host objects are directly reachable: nothing is copied). */
export function createVmEngine(): BaselineEngine {
  const context = vm.createContext({ moss: { ledger: new Ledger(), records: [] } });
  return {
    async execute(script) {
      const returns = await vm.runInContext(`${script}\nmain(moss);`, context);
      const snapshot = JSON.parse(
        vm.runInContext("JSON.stringify({ records: moss.records })", context) as string,
      );
      return { returns, snapshot };
    },
    dispose() {},
  };
}

let quickJs: Promise<QuickJSWASMModule> | undefined;

/** Loads the QuickJS WebAssembly module once. */
export function loadQuickJs(): Promise<QuickJSWASMModule> {
  quickJs ??= getQuickJS();
  return quickJs;
}

/** quickjs-emscripten: a fresh QuickJS runtime + context with the `Ledger` methods exposed as host functions. */
export function createQuickJsEngine(module: QuickJSWASMModule): BaselineEngine {
  const context = module.newContext();
  const ledger = new Ledger();
  const moss = context.newObject();
  const ledgerHandle = context.newObject();
  const define = (name: string, implementation: (...args: QuickJSHandle[]) => QuickJSHandle) => {
    const handle = context.newFunction(name, implementation);
    context.setProp(ledgerHandle, name, handle);
    handle.dispose();
  };
  define("add", (amount) => context.newNumber(ledger.add(context.getNumber(amount!))));
  define("label", (name) => context.newString(ledger.label(context.getString(name!))));
  define("total", () => {
    const deferred = context.newPromise();
    ledger.total().then((total) => {
      const value = context.newNumber(total);
      deferred.resolve(value);
      value.dispose();
    });
    deferred.settled.then(() => context.runtime.executePendingJobs());
    return deferred.handle;
  });
  context.setProp(moss, "ledger", ledgerHandle);
  ledgerHandle.dispose();
  const records = context.newArray();
  context.setProp(moss, "records", records);
  records.dispose();
  context.setProp(context.global, "moss", moss);
  moss.dispose();
  return {
    async execute(script) {
      const result = context.unwrapResult(context.evalCode(`${script}\nmain(moss);`));
      const settled = context.resolvePromise(result);
      result.dispose();
      context.runtime.executePendingJobs();
      const returned = context.unwrapResult(await settled);
      const returns = context.dump(returned);
      returned.dispose();
      const snapshotHandle = context.unwrapResult(context.evalCode("({ records: moss.records })"));
      const snapshot = context.dump(snapshotHandle);
      snapshotHandle.dispose();
      return { returns, snapshot };
    },
    dispose() {
      context.dispose(); // also disposes the runtime newContext() made for it
    },
  };
}
