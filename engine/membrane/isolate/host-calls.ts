// Host calls from the isolate: one call made at once or queued for its turn's batch, the host's reply turned into
// what model code receives, and host promises settled later.
import type { HostOperation } from "../protocol.ts";
import {
  ArrayIsArray,
  ErrorCtor,
  JSONParse,
  JSONStringify,
  MapDelete,
  MapGet,
  MapSet,
  NumberCtor,
  PromiseCtor,
  ReflectApply,
} from "../wire/intrinsics.ts";
import { nullArray } from "../wire/values.ts";
import { type CallSiteFrames, callSite } from "./call-site.ts";
import { unreported } from "./clock.ts";
import { hostError, withSite } from "./errors.ts";
import { knownHandle } from "./proxy-shapes.ts";
import { append, slice } from "./records.ts";
import type { IsolateState, Settlers } from "./state.ts";

/**
 * The frames a sync call's site is first looked for in (the handle's function, the caller, two more): capturing a
 * stack is most of a host call's cost in the isolate and grows with the frames taken; a caller deeper (a call made
 * through built-ins) is looked for again in the whole stack (call-site.ts). A call declared to return a promise
 * takes as many as a default stack shows: its rejection's stack shows them.
 */
const SITE_FRAMES = 4;
const PROMISE_FRAMES = 12;

/** A batch crosses at once when it holds this many calls or this many characters of arguments. */
const MAX_BATCH_CALLS = 256;
const MAX_BATCH_CHARACTERS = 1024 * 1024;

/** Whether host calls are refused: a limit other than stdout's was hit (the call fails with its message). */
function callsStopped(state: IsolateState): boolean {
  return state.limitHit !== null && state.limitHit.kind !== "output-limit";
}

/**
 * Makes a host call. A `batched` call (a method declared to return a Promise) is queued and its promise returned
 * at once; the queue crosses in one batch at the end of the microtask turn, or before any other call crosses, so
 * the host sees every call in program order. Everything a call decides at once (the limit already hit, its
 * arguments' encoding, its call site, the clock and random values read before it) is decided when it is made.
 * Model code's frames sit right above this function: call sites are read above it.
 */
export function callHost(
  state: IsolateState,
  operation: HostOperation,
  id: number,
  member: string | null,
  args: unknown[],
  batched = false,
): unknown {
  if (callsStopped(state)) throw new ErrorCtor(state.limitHit!.message);
  const label = member === null ? "host function" : `${member}()`;
  const encoded = state.codec.encode(args, {
    __proto__: null,
    rootPath: `arguments of ${label}`,
    knownHandle,
  } as any);
  // Where in the run's script the call is made (approvals, policies and the trace name its line; call-site.ts).
  // The rejection of a host promise arrives later from bootstrap code: the caller's frames are kept for its stack.
  const site = callSite(callHost, batched ? PROMISE_FRAMES : SITE_FRAMES);
  const at = site.at;
  const stack = site.frames;
  if (batched) {
    const call = nullArray(operation, id, member, encoded, at, unreported(state));
    const promise = new PromiseCtor((resolve, reject) => {
      append(state.queued, { __proto__: null, call, resolve, reject, site: stack });
    });
    state.queuedCharacters += encoded.length;
    // A batch holds its calls' arguments until it crosses: a long or heavy one crosses at once.
    if (state.queued.length >= MAX_BATCH_CALLS || state.queuedCharacters >= MAX_BATCH_CHARACTERS)
      flush(state);
    else if (!state.flushScheduled) {
      state.flushScheduled = true;
      void flushLater(state);
    }
    return promise;
  }
  flush(state);
  if (callsStopped(state)) throw new ErrorCtor(state.limitHit!.message);
  // Bridges are called as plain functions: never with the state record as `this`.
  const hostCall = state.hostCall;
  return receive(state, hostCall(operation, id, member, encoded, at, unreported(state)), stack, undefined);
}

// `await` of a plain value queues one microtask and looks up nothing model code could have patched.
async function flushLater(state: IsolateState): Promise<void> {
  await undefined;
  flush(state);
}

/** Sends the queued calls in one batch and settles each call's promise from its reply; never throws. */
function flush(state: IsolateState): void {
  state.flushScheduled = false;
  if (state.queued.length === 0) return;
  const batch = state.queued;
  state.queued = [];
  state.queuedCharacters = 0;
  let replies: unknown;
  if (!callsStopped(state)) {
    const calls = nullArray();
    for (let i = 0; i < batch.length; i++) calls[i] = batch[i]!.call;
    try {
      const hostCalls = state.hostCalls;
      replies = JSONParse(hostCalls(JSONStringify(calls)));
    } catch {}
  }
  for (let i = 0; i < batch.length; i++) {
    const entry = batch[i]!;
    try {
      const reply = ArrayIsArray(replies) ? replies[i] : undefined;
      if (typeof reply === "string") receive(state, reply, entry.site, entry);
      // The host stopped before this call: it fails as it would have, made after the call that stopped it.
      else
        throw new ErrorCtor(
          state.limitHit !== null ? state.limitHit.message : "the host did not answer this call",
        );
    } catch (error) {
      entry.reject(withSite(error, entry.site));
    }
  }
}

/**
 * What a host call's reply means for model code: its value, a thrown error, or a promise settled later (`into`
 * given: that promise's settlers receive the value or the later settlement instead).
 */
function receive(
  state: IsolateState,
  reply: string,
  site: CallSiteFrames | undefined,
  into: Settlers | undefined,
): unknown {
  const tag = slice(reply, 0, 1);
  const body = slice(reply, 1);
  if (tag === "v") {
    const value = state.codec.decode(body, state.decodeOptions);
    if (into !== undefined) into.resolve(value);
    return value;
  }
  if (tag === "e") throw hostError(state.codec.decode(body, state.decodeOptions));
  if (tag === "p") {
    const promiseId = NumberCtor(body);
    if (into !== undefined) {
      ReflectApply(MapSet, state.pending, [
        promiseId,
        { __proto__: null, resolve: into.resolve, reject: into.reject, site },
      ]);
      return undefined;
    }
    return new PromiseCtor((resolve, reject) => {
      ReflectApply(MapSet, state.pending, [promiseId, { __proto__: null, resolve, reject, site }]);
    });
  }
  // The call waits for a person's decision: the run pauses once nothing else can happen (the host decides when).
  if (tag === "w") return into !== undefined ? undefined : new PromiseCtor(() => {});
  if (tag === "l" || tag === "d" || tag === "s") {
    const kind = tag === "l" ? "call-limit" : tag === "d" ? "replay-diverged" : "paused";
    if (state.limitHit === null) state.limitHit = { __proto__: null, kind, message: body } as any;
    throw new ErrorCtor(body);
  }
  throw new ErrorCtor(`unexpected host reply ${JSONStringify(tag)}`);
}

/** Settles a host promise with its value (`tag` "v") or its error, as the host decided. */
export function settle(state: IsolateState, promiseId: number, tag: string, body: string): void {
  const entry = ReflectApply(MapGet, state.pending, [promiseId]);
  if (entry === undefined) return;
  ReflectApply(MapDelete, state.pending, [promiseId]);
  let value: unknown;
  try {
    value = state.codec.decode(body, state.decodeOptions);
  } catch (error) {
    entry.reject(error);
    return;
  }
  if (tag === "v") {
    entry.resolve(value);
    return;
  }
  entry.reject(withSite(hostError(value), entry.site));
}

/** Settles several host promises in one entry: a JSON array of `[promiseId, tag, body]`, in order. */
export function settleAll(state: IsolateState, settlements: string): void {
  const list = JSONParse(settlements);
  if (!ArrayIsArray(list)) return;
  for (let i = 0; i < list.length; i++) {
    const item = list[i];
    if (ArrayIsArray(item)) settle(state, item[0], item[1], item[2]);
  }
}
