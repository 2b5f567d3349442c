import type { HandleShape } from "../protocol.ts";
import {
  ArrayBufferByteLength,
  ArrayBufferCtor,
  ArrayIsArray,
  binaryConstructors,
  DataViewBuffer,
  DataViewByteLength,
  DataViewByteOffset,
  ErrorCtor,
  FunctionToString,
  ObjectCreate,
  ObjectPrototype,
  ObjectToString,
  ReflectApply,
  ReflectDefineProperty,
  ReflectGetPrototypeOf,
  ReflectSetPrototypeOf,
  SharedArrayBufferByteLength,
  StringCharCodeAt,
  StringCtor,
  StringFromCharCode,
  TypedArrayBuffer,
  TypedArrayByteLength,
  TypedArrayByteOffset,
  TypedArrayKind,
  TypeErrorCtor,
  Uint8ArrayCtor,
} from "./intrinsics.ts";

/** Deepest nesting any value may have (the root is level 0). */
export const MAX_DEPTH = 1000;
/** Longest bigint in decimal digits (Python's default int/str conversion limit): decimal conversion is quadratic. */
export const MAX_BIGINT_DIGITS = 4300;
export const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
export const base64Codes = new Uint8ArrayCtor(64);
export const base64Values = new Uint8ArrayCtor(128);
for (let i = 0; i < 128; i++) base64Values[i] = 255;
for (let i = 0; i < 64; i++) {
  base64Codes[i] = ReflectApply(StringCharCodeAt, BASE64, [i]) as number;
  base64Values[base64Codes[i]!] = i;
}

export function define(target: object, key: PropertyKey, value: unknown): void {
  ReflectDefineProperty(target, key, {
    __proto__: null,
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  } as PropertyDescriptor);
}

/**
 * A wire node: an array without a prototype, so writing into it with plain assignment can never reach a setter
 * that model code planted on `Array.prototype`, and `JSON.stringify` finds no inherited `toJSON` on it.
 */
export function nullArray(...items: unknown[]): unknown[] {
  ReflectSetPrototypeOf(items, null);
  return items;
}

/** A prototype-less copy of a handle shape (copied by index: no iterator model code could have replaced). */
export function plainShape(shape: HandleShape): HandleShape {
  const copy = ObjectCreate(null) as HandleShape;
  copy.id = shape.id;
  copy.kind = shape.kind;
  copy.methods = copyStrings(shape.methods);
  copy.properties = copyStrings(shape.properties);
  if (ArrayIsArray(shape.asyncMethods)) copy.asyncMethods = copyStrings(shape.asyncMethods);
  return copy;
}

export function copyStrings(list: readonly string[]): string[] {
  const copy = nullArray() as string[];
  for (let i = 0; i < list.length; i++) copy[i] = StringCtor(list[i]);
  return copy;
}

export function hasBrand(method: Function, value: unknown): boolean {
  try {
    ReflectApply(method, value, []);
    return true;
  } catch {
    return false;
  }
}

export function isErrorLike(value: object): boolean {
  return ReflectApply(ObjectToString, value, []) === "[object Error]";
}

export function isPlainObject(value: object): boolean {
  const prototype = ReflectGetPrototypeOf(value);
  return prototype === ObjectPrototype || prototype === null;
}

export function limitError(message: string): Error {
  const error = new ErrorCtor(message);
  error.name = "WireLimitError";
  return error;
}

export function constructorName(value: object): string | undefined {
  try {
    const prototype = ReflectGetPrototypeOf(value) as { constructor?: unknown } | null;
    const ctor = prototype?.constructor;
    if (typeof ctor === "function" && typeof ctor.name === "string" && ctor.name !== "") return ctor.name;
  } catch {}
  return undefined;
}

export function describe(value: unknown): string {
  if (typeof value === "function") {
    let source = "";
    try {
      source = ReflectApply(FunctionToString, value, []) as string;
    } catch {}
    if (source.startsWith("class")) return "a class";
    return "a function";
  }
  if (typeof value === "symbol") return "a symbol";
  if (typeof value === "object" && value !== null) {
    if (typeof (value as { then?: unknown }).then === "function") return "a Promise (await it first)";
    const name = constructorName(value);
    return name === undefined ? "an object that is not plain data" : `an instance of ${name}`;
  }
  return `a ${typeof value}`;
}

// ---- binary data: always a copy of exactly the bytes the view shows ------------------------------------------
/** `[kind, bytes]` for a typed array, ArrayBuffer or DataView (a view of exactly its bytes), else undefined. */
export function binaryOf(object: object, tag: string): [string, Uint8Array] | undefined {
  const kind = ReflectApply(TypedArrayKind, object, []) as string | undefined;
  if (typeof kind === "string") {
    const buffer = ReflectApply(TypedArrayBuffer, object, []) as ArrayBuffer;
    const offset = ReflectApply(TypedArrayByteOffset, object, []) as number;
    const length = ReflectApply(TypedArrayByteLength, object, []) as number;
    return [kind, bytesOf(buffer, offset, length)];
  }
  if (tag === "[object ArrayBuffer]" && hasBrand(ArrayBufferByteLength, object)) {
    const length = ReflectApply(ArrayBufferByteLength, object, []) as number;
    return ["ArrayBuffer", bytesOf(object as ArrayBuffer, 0, length)];
  }
  if (
    tag === "[object SharedArrayBuffer]" &&
    SharedArrayBufferByteLength !== undefined &&
    hasBrand(SharedArrayBufferByteLength, object)
  ) {
    const length = ReflectApply(SharedArrayBufferByteLength, object, []) as number;
    return ["ArrayBuffer", bytesOf(object as ArrayBuffer, 0, length)];
  }
  if (tag === "[object DataView]" && hasBrand(DataViewByteLength, object)) {
    const buffer = ReflectApply(DataViewBuffer, object, []) as ArrayBuffer;
    const offset = ReflectApply(DataViewByteOffset, object, []) as number;
    const length = ReflectApply(DataViewByteLength, object, []) as number;
    return ["DataView", bytesOf(buffer, offset, length)];
  }
  return undefined;
}

/** A byte view of exactly the bytes shown (never the rest of the buffer); it is read once, into base64. */
export function bytesOf(buffer: ArrayBuffer, offset: number, length: number): Uint8Array {
  if (length === 0) return new Uint8ArrayCtor(0);
  return new Uint8ArrayCtor(buffer, offset, length);
}

export function toBase64(bytes: Uint8Array): string {
  let text = "";
  let chunk = nullArray() as number[];
  const length = bytes.length;
  for (let i = 0; i < length; i += 3) {
    const a = bytes[i]!;
    const b = i + 1 < length ? bytes[i + 1]! : 0;
    const c = i + 2 < length ? bytes[i + 2]! : 0;
    chunk[chunk.length] = base64Codes[a >> 2]!;
    chunk[chunk.length] = base64Codes[((a & 3) << 4) | (b >> 4)]!;
    chunk[chunk.length] = i + 1 < length ? base64Codes[((b & 15) << 2) | (c >> 6)]! : 61;
    chunk[chunk.length] = i + 2 < length ? base64Codes[c & 63]! : 61;
    if (chunk.length >= 8192) {
      text += ReflectApply(StringFromCharCode, null, chunk) as string;
      chunk = nullArray() as number[];
    }
  }
  if (chunk.length > 0) text += ReflectApply(StringFromCharCode, null, chunk) as string;
  return text;
}

/** Byte length of valid base64 text, or -1. */
export function base64Length(text: unknown): number {
  if (typeof text !== "string" || text.length % 4 !== 0) return -1;
  let padding = 0;
  if (text.length > 0 && ReflectApply(StringCharCodeAt, text, [text.length - 1]) === 61) padding++;
  if (text.length > 1 && ReflectApply(StringCharCodeAt, text, [text.length - 2]) === 61) padding++;
  return (text.length / 4) * 3 - padding;
}

/** The 6-bit value of the base64 character at `position` of text holding `length` bytes (padding 0), or 255. */
function base64Digit(text: string, position: number, length: number): number {
  const code = ReflectApply(StringCharCodeAt, text, [position]) as number;
  if (code === 61 && position + 4 - (position % 4) === text.length) {
    const place = position % 4;
    return place === 3 || (place === 2 && length % 3 === 1) ? 0 : 255;
  }
  return code < 128 ? base64Values[code]! : 255;
}

/** Whether text of `length` bytes (as `base64Length` gives it) holds only base64 characters, padding at its end. */
export function isBase64(text: string, length: number): boolean {
  for (let i = 0; i < text.length; i++) if (base64Digit(text, i, length) === 255) return false;
  return true;
}

export function fromBase64(text: string, length: number): ArrayBuffer {
  const buffer = new ArrayBufferCtor(length);
  const bytes = new Uint8ArrayCtor(buffer);
  let out = 0;
  for (let i = 0; i < text.length; i += 4) {
    let group = 0;
    for (let j = 0; j < 4; j++) {
      const value = base64Digit(text, i + j, length);
      if (value === 255) throw new TypeErrorCtor("invalid wire text: bad base64 data");
      group = (group << 6) | value;
    }
    if (out < length) bytes[out++] = (group >> 16) & 255;
    if (out < length) bytes[out++] = (group >> 8) & 255;
    if (out < length) bytes[out++] = group & 255;
  }
  return buffer;
}

/** The element size of a binary kind (1 for ArrayBuffer and DataView), or 0 for an unknown kind. */
export function elementSize(kind: unknown): number {
  if (kind === "ArrayBuffer" || kind === "DataView") return 1;
  if (typeof kind !== "string") return 0;
  const ctor = binaryConstructors[kind] as unknown as { BYTES_PER_ELEMENT?: number } | undefined;
  return ctor === undefined ? 0 : (ctor.BYTES_PER_ELEMENT ?? 0);
}

/** The number a wire `["N", text]` node stands for (-0, NaN, ±Infinity), or undefined for any other text. */
export function specialNumber(text: unknown): number | undefined {
  if (text === "-0") return -0;
  if (text === "NaN") return NaN;
  if (text === "Infinity") return Infinity;
  if (text === "-Infinity") return -Infinity;
  return undefined;
}

export function isDecimal(text: unknown): text is string {
  if (typeof text !== "string") return false;
  const start = text.length > 1 && ReflectApply(StringCharCodeAt, text, [0]) === 45 ? 1 : 0;
  if (start === text.length) return false;
  for (let i = start; i < text.length; i++) {
    const code = ReflectApply(StringCharCodeAt, text, [i]) as number;
    if (code < 48 || code > 57) return false;
  }
  return true;
}

export function messageOf(error: unknown): string {
  try {
    const message = (error as { message?: unknown } | null)?.message;
    return typeof message === "string" ? message : StringCtor(error);
  } catch {
    return "an error that cannot be shown";
  }
}

export function isLimit(error: unknown): boolean {
  try {
    return (error as { name?: unknown } | null)?.name === "WireLimitError";
  } catch {
    return false;
  }
}
