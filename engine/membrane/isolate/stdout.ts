// The run's stdout: `console` and `moss.pprint` write lines through the `emit` bridge, up to the run's byte limit,
// where the output is cut, marked, and the run reports the limit.
import { stdoutTruncationMarker } from "../protocol.ts";
import {
  ErrorCtor,
  ObjectCreate,
  ObjectFreeze,
  ObjectPrototype,
  ReflectDefineProperty,
} from "../wire/intrinsics.ts";
import { formatValues } from "./format.ts";
import { builtin, data, seal } from "./records.ts";
import type { IsolateState } from "./state.ts";
import { truncateToBytes, utf8Length } from "./stdout-text.ts";

function write(state: IsolateState, text: string): void {
  const { maxStdout, emit } = state;
  if (state.stdoutClosed) throw new ErrorCtor(`stdout limit of ${maxStdout} bytes reached`);
  const line = `${text}\n`;
  const bytes = utf8Length(line);
  if (state.stdoutBytes + bytes <= maxStdout) {
    state.stdoutBytes += bytes;
    emit(line);
    return;
  }
  const kept = truncateToBytes(line, maxStdout - state.stdoutBytes);
  const marker = stdoutTruncationMarker(maxStdout);
  emit(`${kept}${kept === "" ? "" : "\n"}${marker}\n`);
  state.stdoutBytes = maxStdout;
  state.stdoutClosed = true;
  if (state.limitHit === null)
    state.limitHit = {
      __proto__: null,
      kind: "output-limit",
      message: `stdout limit of ${maxStdout} bytes reached`,
    } as any;
  throw new ErrorCtor(`stdout limit of ${maxStdout} bytes reached`);
}

/** A console method (or `moss.pprint`, `pretty`): formats its values as one line of stdout. */
export function logger(state: IsolateState, pretty: boolean): Function {
  return seal((...values: unknown[]) => {
    write(state, formatValues(values, pretty));
  });
}

/** The global `console`: log, info, warn, error and debug all write to stdout. */
export function installConsole(state: IsolateState): void {
  const consoleObject = ObjectCreate(ObjectPrototype);
  for (const name of ["log", "info", "warn", "error", "debug"])
    ReflectDefineProperty(consoleObject, name, data(logger(state, false), false));
  ObjectFreeze(consoleObject);
  ReflectDefineProperty(state.global, "console", builtin(consoleObject));
}
