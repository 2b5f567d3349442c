// The run's clock and random values: `Date` and `Math.random` read them through the state record, which logs each
// value read and, on resume, replays the values of the run being resumed.
import {
  ArrayIsArray,
  DateCtor,
  DateNow,
  DateToString,
  JSONParse,
  JSONStringify,
  MathObject,
  MathRandom,
  ProxyCtor,
  ReflectApply,
  ReflectConstruct,
  ReflectDefineProperty,
} from "../wire/intrinsics.ts";
import { append, builtin } from "./records.ts";
import type { IsolateState } from "./state.ts";

// A run that reads the clock in a busy loop must not fill its heap with the log: past this many values per kind
// nothing more is logged (a resume then reads fresh values there, and reports any path that changes as a result).
const MAX_LOGGED_VALUES = 100_000;

function replayed(log: number[], replay: number[], fresh: () => number): number {
  const index = log.length;
  if (index >= MAX_LOGGED_VALUES) return fresh();
  const value = index < replay.length && typeof replay[index] === "number" ? replay[index]! : fresh();
  append(log, value);
  return value;
}

function clock(state: IsolateState): number {
  return replayed(state.clockLog, state.clockReplay, () => ReflectApply(DateNow, DateCtor, []));
}

function random(state: IsolateState): number {
  return replayed(state.randomLog, state.randomReplay, () => ReflectApply(MathRandom, MathObject, []));
}

/** `new Date()`, `Date()` and `Date.now()` read the run's clock, `Math.random()` its random values; every other use of Date is untouched. */
export function installClock(state: IsolateState): void {
  const RecordedDate = new ProxyCtor(DateCtor, {
    __proto__: null,
    construct(target: DateConstructor, args: unknown[], newTarget: Function) {
      return ReflectConstruct(target, args.length === 0 ? [clock(state)] : args, newTarget);
    },
    apply() {
      return ReflectApply(DateToString, ReflectConstruct(DateCtor, [clock(state)]), []);
    },
  } as ProxyHandler<DateConstructor>);
  ReflectDefineProperty(
    DateCtor,
    "now",
    builtin(function now() {
      return clock(state);
    }),
  );
  ReflectDefineProperty(DateCtor.prototype, "constructor", builtin(RecordedDate));
  ReflectDefineProperty(state.global, "Date", builtin(RecordedDate));
  ReflectDefineProperty(
    MathObject,
    "random",
    builtin(function random_() {
      return random(state);
    }),
  );
}

/** Starts a run's logs: empty, replaying `replayJson` (JSON `{ clock, random }`, "" for a fresh run). */
export function beginClock(state: IsolateState, replayJson: string): void {
  state.clockLog = [];
  state.randomLog = [];
  state.clockReported = 0;
  state.randomReported = 0;
  const replay = replayJson === "" ? null : JSONParse(replayJson);
  state.clockReplay = replay !== null && ArrayIsArray(replay.clock) ? replay.clock : [];
  state.randomReplay = replay !== null && ArrayIsArray(replay.random) ? replay.random : [];
}

/** The clock and random values the current run has read so far (JSON `{ clock, random }`): a paused run's log. */
export function recorded(state: IsolateState): string {
  return JSONStringify({ __proto__: null, clock: state.clockLog, random: state.randomLog });
}

/**
 * The values read since the host was last told (JSON `{ clock, random }`, "" when none): every host call carries
 * them, so a checkpoint the host takes at a call holds every value the code read before that call (a takeover
 * replays them).
 */
export function unreported(state: IsolateState): string {
  const { clockLog, randomLog } = state;
  if (clockLog.length === state.clockReported && randomLog.length === state.randomReported) return "";
  const clockValues: number[] = [];
  const randomValues: number[] = [];
  for (let i = state.clockReported; i < clockLog.length; i++) append(clockValues, clockLog[i]);
  for (let i = state.randomReported; i < randomLog.length; i++) append(randomValues, randomLog[i]);
  state.clockReported = clockLog.length;
  state.randomReported = randomLog.length;
  return JSONStringify({ __proto__: null, clock: clockValues, random: randomValues });
}
