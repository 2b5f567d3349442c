// Records for the isolate half: property descriptors and list writes that no prototype model code patches can reach.
import { ReflectApply, StringSlice } from "../wire/intrinsics.ts";
import { define } from "../wire/values.ts";

export function data(value: unknown, writable = false, enumerable = true): PropertyDescriptor {
  return { __proto__: null, value, writable, enumerable, configurable: false } as PropertyDescriptor;
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
