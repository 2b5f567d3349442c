import type { HostBatchBridge, HostCallBridge } from "../protocol.ts";
import type { WireCodec } from "../wire/codec.ts";
import { ObjectFreeze } from "../wire/intrinsics.ts";
import { hardenCallSites } from "./call-site.ts";
import { installClock, recorded } from "./clock.ts";
import { settle, settleAll } from "./host-calls.ts";
import { install } from "./install.ts";
import { fixArrayBuffers, removeEscapes, trackModelProxies } from "./lockdown.ts";
import { makeProxy } from "./proxies.ts";
import { runScript } from "./run.ts";
import { createState } from "./state.ts";
import { installConsole } from "./stdout.ts";

/*
 * The isolate-side half of the membrane. `sandboxBootstrap` is never called on the host: it is bundled by esbuild
 * (membrane/isolate-script.ts) into the one classic script that runs inside the isolate (strict mode, before any
 * model code). It may import only isolate/, wire/, protocol.ts and visibility.ts (scripts/check-arrows.js checks).
 * Each job has a file: lockdown.ts (the globals taken away or replaced), proxies.ts (host handles), host-calls.ts,
 * clock.ts, stdout.ts, install.ts, snapshot.ts and run.ts, over one state record (state.ts) made here; pure jobs are
 * in records.ts, format.ts, stdout-text.ts, proxy-shapes.ts, errors.ts. The script is evaluated once per isolate, so
 * module state is per isolate like the record.
 * Everything it needs from the host arrives as arguments: the wire codec, `hostCall` (a synchronous bridge that
 * takes and returns strings only), `emit` (stdout text), `done` (a run's envelope) and `hostCalls` (a batch). Those
 * bridges live only in the state record; the function returns the entry points the host drives.
 *
 * Rule for this code: it runs beside model code that may patch any prototype, so it calls intrinsics captured
 * before model code runs (wire/intrinsics.ts, first in the script) through `ReflectApply`, builds descriptors and
 * records with null prototypes, and never hands an internal object to a method looked up on a prototype.
 */

/** The entry points the bootstrap returns to the host (reached through isolated-vm references only). */
export interface SandboxEntryPoints {
  /** `definitions`: the session's kept definitions as a classic script, evaluated last (see `SessionSetup`). */
  install(
    globals: string,
    mossData: string,
    mossServices: string,
    dataFields: string,
    definitions: string,
  ): void;
  /** Resets the run's state, evaluates the script as a classic script and starts the target: one entry, one hop. */
  runScript(
    maxStdoutBytes: number,
    source: string,
    filename: string,
    target: string,
    argumentsJson: string,
    maxResultBytes: number,
    replayJson: string,
  ): void;
  settle(promiseId: number, tag: string, body: string): void;
  /** Settles several host promises in one entry: a JSON array of `[promiseId, tag, body]`, in order. */
  settleAll(settlements: string): void;
  /** The clock and random values the current run has read so far (JSON `{ clock, random }`): a paused run's log. */
  recorded(): string;
}

export function sandboxBootstrap(
  codec: WireCodec,
  hostCall: HostCallBridge,
  emit: (text: string) => void,
  done: (envelope: string) => void,
  hostCalls: HostBatchBridge,
): SandboxEntryPoints {
  const state = createState(codec, { __proto__: null, hostCall, hostCalls, emit, done } as any, makeProxy);
  const global = state.global;
  hardenCallSites(global);
  removeEscapes(global);
  fixArrayBuffers(global);
  trackModelProxies(global);
  installClock(state);
  installConsole(state);
  return ObjectFreeze({
    __proto__: null,
    install: (globals: string, mossData: string, mossServices: string, fields: string, definitions: string) =>
      install(state, globals, mossData, mossServices, fields, definitions),
    runScript: (
      maxStdoutBytes: number,
      source: string,
      filename: string,
      target: string,
      argumentsJson: string,
      maxResultBytes: number,
      replayJson: string,
    ) =>
      runScript(state, maxStdoutBytes, source, filename, target, argumentsJson, maxResultBytes, replayJson),
    settle: (promiseId: number, tag: string, body: string) => settle(state, promiseId, tag, body),
    settleAll: (settlements: string) => settleAll(state, settlements),
    recorded: () => recorded(state),
  } as any);
}
