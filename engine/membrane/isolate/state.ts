// The isolate half's one state record: made once per isolate by the bootstrap and passed to every job that reads or
// changes it (host calls, the clock, stdout, install, the snapshot, the run). It has no prototype and every field is
// set when it is made, so no read or write of it can reach a prototype model code patched; model code never sees it.
import type { HostBatchBridge, HostCallBridge } from "../protocol.ts";
import type { WireCodec } from "../wire/codec.ts";
import { MapClear, MapCtor, ObjectFreeze, ReflectApply, ReflectSetPrototypeOf } from "../wire/intrinsics.ts";
import type { CallSiteFrames } from "./call-site.ts";

/**
 * What stopped the run's host calls. `paused`: a call that returns a plain value waits for a person; the isolate
 * stops making host calls and the host reports the run as paused (it never delivers this envelope's error).
 */
export interface LimitHit {
  kind: "output-limit" | "call-limit" | "replay-diverged" | "paused";
  message: string;
}

export interface Settlers {
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** A host promise waiting for the host to settle it, with the frames of the call that made it. */
export interface PendingPromise extends Settlers {
  site?: CallSiteFrames;
}

/** A call of an `asyncMethods` member waiting for its turn's batch. */
export interface QueuedCall extends Settlers {
  call: unknown[];
  site: CallSiteFrames | undefined;
}

/**
 * Per data field, what the host holds: the wire text that carried it (the installed data or a snapshot) and, once
 * a snapshot of this isolate encoded it, the encoder's node table of that snapshot (private: model code never
 * reaches it) with the field's node and the size it was charged.
 */
export interface SavedField {
  text: string;
  hasCopy: boolean;
  nodes?: unknown[];
  index?: number;
  /** Whether the snapshot's table reaches a node from two places (then sharing is compared too). */
  shares?: boolean;
  expanded?: number;
  length?: number;
}

/** The host's bridges: they live only in this record, never on a global. */
export interface IsolateBridges {
  /** A synchronous host call: takes and returns strings only. */
  hostCall: HostCallBridge;
  /** A batch of host calls (JSON array in, JSON array of replies out). */
  hostCalls: HostBatchBridge;
  /** Stdout text. */
  emit: (text: string) => void;
  /** A run's envelope. */
  done: (envelope: string) => void;
}

export interface IsolateState extends IsolateBridges {
  codec: WireCodec;
  global: any;
  /** How the codec decodes values of the host: a handle becomes this isolate's proxy of it. */
  decodeOptions: any;
  /** The proxy of each host handle id made so far. */
  proxyById: Map<number, object>;

  // The run: reset by `beginRun`.
  maxStdout: number;
  stdoutBytes: number;
  stdoutClosed: boolean;
  limitHit: LimitHit | null;
  pending: Map<number, PendingPromise>;
  queued: QueuedCall[];
  queuedCharacters: number;
  flushScheduled: boolean;

  // The run's clock and random values (clock.ts): read, replayed, and how much of each log the host was told.
  clockLog: number[];
  randomLog: number[];
  clockReplay: number[];
  randomReplay: number[];
  clockReported: number;
  randomReported: number;

  // The session (install.ts, snapshot.ts).
  installed: boolean;
  /** The object model code sees as `moss` through a proxy; bootstrap code reads it directly. */
  moss: any;
  /** Names of `moss` a trap handed out or changed: marked for good. */
  touched: Map<string | symbol, true>;
  dataFields: string[];
  /** Data fields that have lived on `moss` (installed, or set by the code since). */
  knownFields: Map<string, true>;
  saved: Map<string, SavedField>;
}

/** The record of a new isolate; `makeProxy` makes the proxy of a handle the codec decodes. */
export function createState(
  codec: WireCodec,
  bridges: IsolateBridges,
  makeProxy: (state: IsolateState, shape: any) => object,
): IsolateState {
  // A literal whose prototype is then set to null, not a `__proto__: null` literal: V8 keeps this one's properties
  // fast (the record is read on every host call and every clock read), the literal's in a dictionary. No model code
  // runs in between, and a literal defines its properties (it never calls a setter).
  const state: IsolateState = {
    codec,
    global: globalThis,
    hostCall: bridges.hostCall,
    hostCalls: bridges.hostCalls,
    emit: bridges.emit,
    done: bridges.done,
    decodeOptions: undefined,
    proxyById: new MapCtor(),
    maxStdout: 65536,
    stdoutBytes: 0,
    stdoutClosed: false,
    limitHit: null,
    pending: new MapCtor(),
    queued: [],
    queuedCharacters: 0,
    flushScheduled: false,
    clockLog: [],
    randomLog: [],
    clockReplay: [],
    randomReplay: [],
    clockReported: 0,
    randomReported: 0,
    installed: false,
    moss: undefined,
    touched: new MapCtor(),
    dataFields: [],
    knownFields: new MapCtor(),
    saved: new MapCtor(),
  };
  ReflectSetPrototypeOf(state, null);
  state.decodeOptions = ObjectFreeze({ __proto__: null, onHandle: (shape: any) => makeProxy(state, shape) });
  return state;
}

/** Resets what one run counts: its stdout, the limit it hit, its host promises and its queued calls. */
export function beginRun(state: IsolateState, maxStdoutBytes: number): void {
  state.maxStdout = maxStdoutBytes;
  state.stdoutBytes = 0;
  state.stdoutClosed = false;
  state.limitHit = null;
  ReflectApply(MapClear, state.pending, []);
  state.queued = [];
  state.queuedCharacters = 0;
  state.flushScheduled = false;
}
