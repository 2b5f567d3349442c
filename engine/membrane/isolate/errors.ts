// Errors across the membrane: a host error as model code receives it, the stack of a later rejection, and what a
// thrown value of model code becomes in the run's envelope.
import {
  ArrayIsArray,
  ErrorCtor,
  errorConstructors,
  ObjectCreate,
  ObjectKeys,
  ObjectToString,
  ReflectApply,
  ReflectDefineProperty,
  StringCtor,
} from "../wire/intrinsics.ts";
import { type CallSiteFrames, formatFrames } from "./call-site.ts";
import { inspect } from "./format.ts";
import { builtin, field } from "./records.ts";

// Captured when the isolate script is evaluated, before model code runs (call-site.ts takes its own the same way).
const ErrorCaptureStackTrace = (ErrorCtor as any).captureStackTrace as (target: object) => void;

/** The error model code receives for a host error's decoded value: its class when it is a built-in one. */
export function hostError(value: any): Error {
  const name = typeof value?.name === "string" ? value.name : "Error";
  const message = typeof value?.message === "string" ? value.message : StringCtor(value);
  const ctor = errorConstructors[name];
  let error: any;
  if (ctor !== undefined) {
    error = new ctor(message);
  } else {
    error = ObjectCreate(ErrorCtor.prototype);
    ReflectDefineProperty(error, "name", builtin(name));
    ReflectDefineProperty(error, "message", builtin(message));
    ErrorCaptureStackTrace(error);
  }
  if (
    value !== null &&
    typeof value === "object" &&
    (typeof value.code === "string" || typeof value.code === "number")
  ) {
    ReflectDefineProperty(error, "code", field(value.code));
  }
  const fields = value !== null && typeof value === "object" ? value.fields : undefined;
  if (fields !== null && typeof fields === "object" && !ArrayIsArray(fields)) {
    // An index loop: `for…of` would call an array iterator model code may have patched.
    const keys = ObjectKeys(fields);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      if (key === "name" || key === "message" || key === "code" || key === "stack" || key === "__proto__")
        continue;
      ReflectDefineProperty(error, key, field(fields[key]));
    }
  }
  return error;
}

/** The error with the frames of the call that caused it (its stack text names the caller's lines). */
export function withSite(error: any, site: CallSiteFrames | undefined): unknown {
  if (site === undefined || error === null || typeof error !== "object") return error;
  const header = `${StringCtor(error.name)}: ${StringCtor(error.message)}`;
  ReflectDefineProperty(error, "stack", builtin(`${header}${formatFrames(site)}`));
  return error;
}

/** What a value model code threw becomes in the envelope: an error's name, message and stack, or its inspection. */
export function describeError(error: unknown): { name: string; message: string; stack?: string } {
  if ((typeof error === "object" || typeof error === "function") && error !== null) {
    try {
      const isError = ReflectApply(ObjectToString, error, []) === "[object Error]";
      const name = (error as any).name;
      const message = (error as any).message;
      const stack = (error as any).stack;
      if (isError || typeof message === "string") {
        return {
          __proto__: null,
          name: typeof name === "string" ? name : "Error",
          message: typeof message === "string" ? message : StringCtor(message),
          stack: typeof stack === "string" ? stack : undefined,
        } as any;
      }
    } catch {}
  }
  let text: string;
  try {
    text = inspect(error, false, 0, [], "");
  } catch {
    text = "a value that cannot be shown";
  }
  return { __proto__: null, name: "Error", message: `Uncaught ${text}` } as any;
}
