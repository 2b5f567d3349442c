import { isolateClosureSource } from "../membrane/index.ts";
import type ivm from "./isolated-vm.ts";
import type { SandboxRunRequest, SessionSetup } from "./sandbox.ts";

/*
 * The isolate half's entry points as this host reaches them: the bootstrap closure compiled into a new context (from
 * this process's code cache when it has one), and the arguments of `install` and `runScript` made from their
 * records. The entry points take plain strings and numbers in a fixed order (isolated-vm copies each one across);
 * this file is the one place that order is written on the host side (`SandboxEntryPoints` in
 * `membrane/isolate/bootstrap.ts` is the other).
 */

/** The isolate half as a script whose value is the closure `evalClosure` would make (same line numbers). */
let bootstrapScript: string | undefined;
export function bootstrapScriptSource(): string {
  bootstrapScript ??= `(function ($0, $1, $2, $3) {${isolateClosureSource()}\n})`;
  return bootstrapScript;
}
const BOOTSTRAP_FILENAME = "moss-sandbox-bootstrap.js";

/**
 * V8's code cache of the bootstrap, made by this process's first isolate: compiling the ~50 kB bootstrap in every
 * new isolate cost ~1.5–3 ms of each session's open; from the cache it costs ~0.5 ms. V8 checks the cache
 * against the source and its flags and compiles afresh when it does not fit. Only trusted host source goes in.
 * The first cache holds what V8 compiles eagerly (the outer closure); `completeBootstrapCache` replaces it with one
 * that also holds the functions a session runs.
 */
let bootstrapCache: ivm.ExternalCopy<ArrayBuffer> | undefined;

/** The size of this process's code cache of the bootstrap in bytes (0: none yet). */
export function bootstrapCacheBytes(): number {
  return bootstrapCache?.copy().byteLength ?? 0;
}

/**
 * Replaces the bootstrap's code cache with one made in `isolate` after it ran the bootstrap: compiling the same
 * source again there returns the script V8 already has, with every function compiled so far, so later isolates
 * read those from the cache instead of compiling them lazily (install, run, the wire, the proxies: ~2.4 ms of CPU
 * per session's open on this project's machine, see `npm run bench -- --only scale`). The isolate must have run
 * trusted code only: the cache holds compiled code of the source, never a value of the isolate's heap. Returns
 * whether the cache grew (V8 may have dropped its compiled script, and then nothing changes).
 */
export async function completeBootstrapCache(isolate: ivm.Isolate): Promise<boolean> {
  const script = (await isolate.compileScript(bootstrapScriptSource(), {
    filename: BOOTSTRAP_FILENAME,
    produceCachedData: true,
  })) as ivm.Script & { cachedData?: ivm.ExternalCopy<ArrayBuffer> };
  try {
    const made = script.cachedData;
    if (made === undefined) return false;
    if (made.copy().byteLength <= bootstrapCacheBytes()) return false;
    bootstrapCache = made;
    return true;
  } finally {
    script.release();
  }
}

/**
 * The bootstrap closure in a new context, compiled from the code cache when this process has one. `sync` does it on
 * the calling thread (the sandbox process, whose isolates run there): each asynchronous step is a hop to
 * isolated-vm's thread and back, ~0.7 ms of CPU per isolate in all.
 */
export async function bootstrapEntry(
  isolate: ivm.Isolate,
  context: ivm.Context,
  bridges: [ivm.Callback, ivm.Callback, ivm.Callback, ivm.Callback],
  sync: boolean,
): Promise<ivm.Reference> {
  const cached = bootstrapCache;
  const options =
    cached === undefined
      ? { filename: BOOTSTRAP_FILENAME, produceCachedData: true }
      : { filename: BOOTSTRAP_FILENAME, cachedData: cached };
  const script = (
    sync
      ? isolate.compileScriptSync(bootstrapScriptSource(), options)
      : await isolate.compileScript(bootstrapScriptSource(), options)
  ) as ivm.Script & { cachedData?: ivm.ExternalCopy<ArrayBuffer>; cachedDataRejected?: boolean };
  if (cached === undefined || script.cachedDataRejected === true) bootstrapCache = script.cachedData;
  try {
    const closure = (
      sync ? script.runSync(context, { reference: true }) : await script.run(context, { reference: true })
    ) as ivm.Reference;
    try {
      const result = { result: { reference: true } } as const;
      return (
        sync ? closure.applySync(undefined, bridges, result) : await closure.apply(undefined, bridges, result)
      ) as ivm.Reference;
    } finally {
      closure.release();
    }
  } finally {
    script.release();
  }
}

/** The arguments of the bootstrap's `install`: a session's setup. */
export function installArguments(setup: SessionSetup): string[] {
  return [
    setup.globals,
    setup.mossData,
    setup.mossServices,
    JSON.stringify(setup.dataFields),
    setup.definitions ?? "",
  ];
}

/**
 * The arguments of the bootstrap's `runScript`: one entry evaluates the run's script and starts its target (each entry
 * into the isolate is a thread hop).
 */
export function runScriptArguments(request: SandboxRunRequest): Array<string | number> {
  const { limits } = request;
  return [
    limits.maxStdoutBytes,
    request.script,
    request.filename,
    request.target,
    JSON.stringify(request.args),
    limits.maxResultBytes,
    request.replay === undefined ? "" : JSON.stringify(request.replay),
  ];
}
