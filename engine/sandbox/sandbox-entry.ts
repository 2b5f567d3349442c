import { fileURLToPath } from "node:url";
import { runnableEntry } from "../runnable-entry.ts";

/*
 * How a sandbox process is started: its entry (`sandbox-process.ts`) as plain JavaScript, and the Node flags and
 * arguments it is given.
 */

const entryFile = fileURLToPath(
  new URL(import.meta.url.endsWith(".ts") ? "./sandbox-process.ts" : "./sandbox-process.js", import.meta.url),
);
let childEntry: string | undefined;

/**
 * The sandbox process's entry as plain JavaScript. From TypeScript sources, the entry and its few imports are
 * bundled once per process with esbuild (isolated-vm kept external, loaded as the host loads it) into a
 * content-addressed file in the temp folder: starting a child then costs no TypeScript loader (≈ 0.5 s saved per
 * start or replacement) and no loader helpers leak into the function sources evaluated in the isolate.
 */
function sandboxEntry(): string {
  // isolated-vm (any alias) stays outside the bundle; the loader (isolated-vm.ts) requires it relative to
  // `import.meta.url`, so the bundle keeps the entry's location and resolves exactly as the host does.
  childEntry ??= runnableEntry(entryFile, {
    external: ["isolated-vm", "isolated-vm-*"],
    importMetaUrl: "entry",
  });
  return childEntry;
}

/**
 * Node ≤ 20 ships resizable/growable buffers behind a harmony flag that we turn off; Node 22+ ships them and rejects
 * the flag at start-up (exit 9). The bootstrap makes them impossible on every line either way.
 */
const RAB_GSAB_FLAG = "--no-harmony-rab-gsab";

/** Whether this Node line accepts `--no-harmony-rab-gsab` (Node 22+ exits with code 9 when given it). */
export function acceptsRabGsabFlag(version = process.versions.node): boolean {
  return Number(version.split(".")[0]) < 22;
}

/** The command line of a sandbox process after `node`: its flags, its entry and how long it polls for replies. */
export function childArguments(spinMicroseconds: number): string[] {
  return [
    "--no-node-snapshot",
    ...(acceptsRabGsabFlag() ? [RAB_GSAB_FLAG] : []),
    sandboxEntry(),
    String(spinMicroseconds),
  ];
}
