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
function bootstrapScriptSource(): string {
  bootstrapScript ??= `(function ($0, $1, $2, $3) {${isolateClosureSource()}\n})`;
  return bootstrapScript;
}
const BOOTSTRAP_FILENAME = "moss-sandbox-bootstrap.js";

/**
 * V8's code cache of the bootstrap, made by this process's first isolate: compiling the ~50 kB bootstrap in every
 * new isolate cost ~1.5–3 ms of each session's open; from the cache it costs ~0.5 ms. V8 checks the cache
 * against the source and its flags and compiles afresh when it does not fit. Only trusted host source goes in.
 */
let bootstrapCache: ivm.ExternalCopy<ArrayBuffer> | undefined;

/** The bootstrap closure in a new context, compiled from the code cache when this process has one. */
export async function bootstrapEntry(
  isolate: ivm.Isolate,
  context: ivm.Context,
  bridges: [ivm.Callback, ivm.Callback, ivm.Callback, ivm.Callback],
): Promise<ivm.Reference> {
  const cached = bootstrapCache;
  const script = (await isolate.compileScript(
    bootstrapScriptSource(),
    cached === undefined
      ? { filename: BOOTSTRAP_FILENAME, produceCachedData: true }
      : { filename: BOOTSTRAP_FILENAME, cachedData: cached },
  )) as ivm.Script & { cachedData?: ivm.ExternalCopy<ArrayBuffer>; cachedDataRejected?: boolean };
  if (cached === undefined || script.cachedDataRejected === true) bootstrapCache = script.cachedData;
  try {
    const closure = (await script.run(context, { reference: true })) as ivm.Reference;
    try {
      return (await closure.apply(undefined, bridges, { result: { reference: true } })) as ivm.Reference;
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
