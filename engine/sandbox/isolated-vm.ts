import { createRequire } from "node:module";
import { MossError } from "../errors.ts";
import type IsolatedVM from "./isolated-vm-api.js";

/**
 * The isolated-vm releases moss-ts installs, each under its own alias as an optional dependency, with the Node
 * lines each one installs and runs on. npm skips an alias whose `engines` exclude the running Node and drops one
 * whose build fails, so the installed set depends on the Node that ran `npm install`; this module loads the one
 * that fits the Node running now. Preferred first: a line's newest release (ready-built binaries where they exist).
 */
export const ISOLATED_VM_RELEASES: readonly IsolatedVmRelease[] = [
  { alias: "isolated-vm-7", version: "7.0.1", nodeLines: [24, 26] },
  { alias: "isolated-vm-6", version: "6.2.0", nodeLines: [22, 24] },
  { alias: "isolated-vm-5", version: "5.0.4", nodeLines: [20, 22] },
];

/** One isolated-vm release and the Node major versions it supports. */
export interface IsolatedVmRelease {
  /** The dependency name it is installed under (`npm:isolated-vm@version`). */
  alias: string;
  version: string;
  nodeLines: readonly number[];
}

/** Why one candidate could not be used. */
interface Attempt {
  name: string;
  reason: string;
}

/**
 * The aliases to try on a Node major version, best first: the releases made for that line, then (for a line
 * newer than any listed) the newest release, then a plain `isolated-vm` the user installed themselves.
 */
export function isolatedVmCandidates(nodeMajor: number): string[] {
  const fitting = ISOLATED_VM_RELEASES.filter((release) => release.nodeLines.includes(nodeMajor));
  const newest = Math.max(...ISOLATED_VM_RELEASES.flatMap((release) => release.nodeLines));
  const chosen = fitting.length > 0 || nodeMajor < newest ? fitting : ISOLATED_VM_RELEASES.slice(0, 1);
  return [...chosen.map((release) => release.alias), "isolated-vm"];
}

/** Loads the isolated-vm that fits this Node, or throws a MossError naming the Node version and what to install. */
export function loadIsolatedVm(
  nodeVersion: string = process.versions.node,
  require: (name: string) => unknown = createRequire(import.meta.url),
): typeof IsolatedVM {
  const major = Number(nodeVersion.split(".")[0]);
  const attempts: Attempt[] = [];
  for (const name of isolatedVmCandidates(major)) {
    try {
      const loaded = require(name) as typeof IsolatedVM | undefined;
      if (typeof loaded?.Isolate === "function") return loaded;
      attempts.push({ name, reason: "it loaded but exports no Isolate class" });
    } catch (error) {
      attempts.push({ name, reason: describeLoadFailure(error) });
    }
  }
  const releases = ISOLATED_VM_RELEASES.filter((release) => release.nodeLines.includes(major));
  const install =
    releases.length > 0
      ? releases.map((release) => `isolated-vm@${release.version}`).join(" or ")
      : `a Node version moss-ts supports (${supportedLines()})`;
  const tried = attempts.map((attempt) => `${attempt.name}: ${attempt.reason}`).join("; ");
  throw new MossError(
    "sandbox-failed",
    `moss-ts cannot run model code on Node ${nodeVersion}: no installed isolated-vm fits it (${tried}). Re-run \`npm install\` with this Node (the isolated-vm for each Node line is an optional ` +
      `dependency: npm installs the one that fits the Node it runs on), or install ${install} yourself. Supported ` +
      `Node lines: ${supportedLines()}; a source build needs python3, make and a C++ compiler.`,
    { nodeVersion, attempts },
  );
}

function supportedLines(): string {
  const lines = [...new Set(ISOLATED_VM_RELEASES.flatMap((release) => release.nodeLines))];
  return lines.sort((a, b) => a - b).join(", ");
}

function describeLoadFailure(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const message = error instanceof Error ? error.message.split("\n")[0] : String(error);
  if (code === "MODULE_NOT_FOUND" && message?.includes("Cannot find module")) return "not installed";
  return `installed but not loadable (${code ? `${code}: ` : ""}${message})`;
}

let loaded: typeof IsolatedVM | undefined;

/**
 * isolated-vm for the running Node, loaded at the first use of one of its members (`new ivm.Isolate(…)`), never by
 * an import: `moss-ts`, `moss prompt` and `moss check` import the sandbox's modules without running model code, and
 * must work on a Node whose isolated-vm is not installed (the sandbox's first run then fails with `sandbox-failed`).
 * A load that failed is tried again at the next use.
 */
const ivm = new Proxy({} as typeof IsolatedVM, {
  get(_target, key) {
    loaded ??= loadIsolatedVm();
    return Reflect.get(loaded, key);
  },
});

// The namespace's types under the same name, so `import ivm from "./isolated-vm.ts"` reads like isolated-vm's own
// default import: `ivm.Isolate` as a value and as a type.
declare namespace ivm {
  type Transferable = IsolatedVM.Transferable;
  type Isolate = IsolatedVM.Isolate;
  type IsolateOptions = IsolatedVM.IsolateOptions;
  type ContextOptions = IsolatedVM.ContextOptions;
  type HeapStatistics = IsolatedVM.HeapStatistics;
  type Context = IsolatedVM.Context;
  type ContextEvalOptions = IsolatedVM.ContextEvalOptions;
  type ContextEvalClosureOptions = IsolatedVM.ContextEvalClosureOptions;
  type Script = IsolatedVM.Script;
  type ScriptRunOptions = IsolatedVM.ScriptRunOptions;
  type Module = IsolatedVM.Module;
  type Reference<T = any> = IsolatedVM.Reference<T>;
  type Dereference<T> = IsolatedVM.Dereference<T>;
  type ReferenceApplyOptions = IsolatedVM.ReferenceApplyOptions;
  type ExternalCopy<T = any> = IsolatedVM.ExternalCopy<T>;
  type Copy<T> = IsolatedVM.Copy<T>;
  type ExternalCopyOptions = IsolatedVM.ExternalCopyOptions;
  type ExternalCopyCopyOptions = IsolatedVM.ExternalCopyCopyOptions;
  type Callback<T extends (...args: any[]) => any = any> = IsolatedVM.Callback<T>;
  type CallbackOptions = IsolatedVM.CallbackOptions;
  type RunOptions = IsolatedVM.RunOptions;
  type ScriptOrigin = IsolatedVM.ScriptOrigin;
  type TransferOptions = IsolatedVM.TransferOptions;
  type TransferOptionsBidirectional = IsolatedVM.TransferOptionsBidirectional;
}

export default ivm;
