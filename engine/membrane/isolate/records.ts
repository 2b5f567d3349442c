// Records for the isolate half: property descriptors and list writes that no prototype model code patches can reach.
import {
  ObjectFreeze,
  ReflectApply,
  ReflectDeleteProperty,
  ReflectSetPrototypeOf,
  StringSlice,
} from "../wire/intrinsics.ts";
import { define } from "../wire/values.ts";

export function data(value: unknown, writable = false, enumerable = true): PropertyDescriptor {
  return { __proto__: null, value, writable, enumerable, configurable: false } as PropertyDescriptor;
}

/** A property as built-ins have theirs (writable, configurable, not enumerable): what a replaced global gets. */
export function builtin(value: unknown): PropertyDescriptor {
  return {
    __proto__: null,
    value,
    writable: true,
    enumerable: false,
    configurable: true,
  } as PropertyDescriptor;
}

/** A property as an assignment makes it (writable, enumerable, configurable): a `moss` data field, an error's field. */
export function field(value: unknown): PropertyDescriptor {
  return {
    __proto__: null,
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  } as PropertyDescriptor;
}

export function append(list: unknown[], value: unknown): void {
  define(list, list.length, value);
}

export function slice(text: string, start: number, end?: number): string {
  return ReflectApply(StringSlice, text, end === undefined ? [start] : [start, end]);
}

export function hasBrand(method: Function, value: unknown): boolean {
  try {
    ReflectApply(method, value, []);
    return true;
  } catch {
    return false;
  }
}

/** A function handed to model code, stripped of its name, length and prototype, and frozen. */
export function seal(fn: Function): Function {
  ReflectDeleteProperty(fn, "name");
  ReflectDeleteProperty(fn, "length");
  ReflectSetPrototypeOf(fn, null);
  return ObjectFreeze(fn);
}
