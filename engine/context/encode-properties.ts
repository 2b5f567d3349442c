import { types } from "node:util";
import SuperJSON from "superjson";
import { MossError } from "../errors.ts";
import { binaryConstructors, WIRE_MAX_BIGINT_DIGITS } from "../membrane/index.ts";
import { propertyAccess } from "../property-access.ts";
import { DEFAULT_LIMITS } from "../types.ts";
import { expandedSizeProblem } from "./measure-value.ts";
import { decodeWithReferentialEqualities } from "./referential-equalities.ts";
import { decodeWireDocument, isWireDocument, wireDocumentProblem } from "./wire-properties.ts";

// A private instance, so classes or symbols registered on superjson's global instance elsewhere change nothing here.
const serializer = new SuperJSON();

/** Typed arrays (all kinds, a Node Buffer as its own bytes), ArrayBuffer and DataView, stored as base64. */
serializer.registerCustom<ArrayBuffer | ArrayBufferView, { kind: string; base64: string }>(
  {
    isApplicable: (value): value is ArrayBuffer | ArrayBufferView => binaryKind(value) !== undefined,
    serialize: (value) => {
      const kind = binaryKind(value)!;
      const bytes = ArrayBuffer.isView(value)
        ? Buffer.from(value.buffer, value.byteOffset, value.byteLength)
        : Buffer.from(value);
      return { kind, base64: bytes.toString("base64") };
    },
    deserialize: (encoded) => {
      const kind = encoded?.kind;
      const base64 = encoded?.base64;
      if (typeof kind !== "string" || typeof base64 !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(base64)) {
        throw new Error("malformed binary data");
      }
      const bytes = Buffer.from(base64, "base64");
      const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
      if (kind === "ArrayBuffer") return buffer;
      const ctor = Object.hasOwn(binaryConstructors, kind) ? binaryConstructors[kind] : undefined;
      const unit = (ctor as { BYTES_PER_ELEMENT?: number } | undefined)?.BYTES_PER_ELEMENT ?? 1;
      if (ctor === undefined || buffer.byteLength % unit !== 0)
        throw new Error(`unknown binary kind ${kind}`);
      return new ctor(buffer);
    },
  },
  "binary",
);

/** The kind of binary data ("Uint8Array" for a Buffer too, "ArrayBuffer", "DataView"), or undefined. */
function binaryKind(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  if (types.isTypedArray(value)) return typedArrayKind(value);
  if (types.isArrayBuffer(value)) return "ArrayBuffer";
  if (types.isDataView(value)) return "DataView";
  return undefined;
}

const typedArrayTag = Object.getOwnPropertyDescriptor(
  Object.getPrototypeOf(Uint8Array.prototype),
  Symbol.toStringTag,
)!.get!;

function typedArrayKind(value: object): string {
  return typedArrayTag.call(value) as string;
}

const FAITHFUL_PROTOTYPES = new Set<object>([Date.prototype, RegExp.prototype, URL.prototype]);

/** Options of `encodeProperties`. */
export interface EncodePropertiesOptions {
  /** Encoded properties of the previous context: a field that cannot be persisted keeps its value from here. */
  previous?: Record<string, unknown>;
  /** Prefix of field paths in warnings. Default `moss`. */
  pathPrefix?: string;
  /** Bound of each field's expanded size (shared references counted at every use). Default: the result limit. */
  maxBytes?: number;
}

/** Encoded properties and one warning per field that could not be persisted. */
export interface EncodedProperties {
  properties: Record<string, unknown>;
  warnings: string[];
}

/**
 * Encodes data-field values for a MossContext, one superjson document (`{ json, meta? }`) per field, so Date,
 * Map, Set, bigint, undefined, RegExp, URL, typed arrays, NaN/±Infinity/-0, shared and circular references
 * survive a round trip. A field holding something superjson cannot carry faithfully (a function, symbol, proxy,
 * class instance, Error, getter, symbol key …) is left out — keeping its previous value when there is one — and
 * named in a warning; fields absent from `values` are removed.
 */
export function encodeProperties(
  values: Record<string, unknown>,
  options: EncodePropertiesOptions = {},
): EncodedProperties {
  const prefix = options.pathPrefix ?? "moss";
  const properties: Record<string, unknown> = {};
  const warnings: string[] = [];
  for (const [key, value] of Object.entries(values)) {
    const path = `${prefix}${propertyAccess(key)}`;
    // Bounded first: superjson writes every use of a shared object in full, and converts bigints to decimal.
    const oversized = expandedSizeProblem(value, options.maxBytes ?? DEFAULT_LIMITS.maxResultBytes);
    let problem =
      oversized === undefined ? findUnpersistable(value, path, new Set()) : `${path} ${oversized}`;
    let encoded: unknown;
    if (problem === undefined) {
      try {
        // superjson's `json` may alias the live value: a JSON round trip detaches the stored copy.
        encoded = JSON.parse(JSON.stringify(serializer.serialize(value as never)));
      } catch (error) {
        problem = `${path} could not be encoded (${error instanceof Error ? error.message : String(error)})`;
      }
    }
    if (problem === undefined) {
      properties[key] = encoded;
      continue;
    }
    const keepsPrevious = options.previous !== undefined && Object.hasOwn(options.previous, key);
    if (keepsPrevious) properties[key] = options.previous![key];
    const direct = problem.startsWith(path) && /^ (is|has|could) /.test(problem.slice(path.length));
    const head = direct ? `${problem} and was not persisted` : `${path} was not persisted: ${problem}`;
    warnings.push(keepsPrevious ? `${head}; its previous value is kept` : head);
  }
  return { properties, warnings };
}

/** Options of `decodeProperties`. */
export interface DecodePropertiesOptions {
  /** Bound of each field's expanded size once decoded. Default: the result limit. */
  maxBytes?: number;
}

/**
 * Decodes the properties of a MossContext back into values, wire documents (version 2) and superjson documents
 * (version 1) alike; a malformed entry, or one over the bounds (expanded size, nesting, bigint digits), throws
 * MossError `context-invalid` naming the property.
 */
export function decodeProperties(
  properties: Record<string, unknown>,
  options: DecodePropertiesOptions = {},
): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const [key, encoded] of Object.entries(properties)) {
    if (isWireDocument(encoded)) {
      const maxBytes = options.maxBytes ?? DEFAULT_LIMITS.maxResultBytes;
      values[key] = decodeWireDocument(key, encoded, propertyAccess(key), maxBytes);
      continue;
    }
    const problem = encodedValueProblem(encoded) ?? oversizedBigintProblem(encoded);
    if (problem !== undefined) {
      throw new MossError("context-invalid", `properties${propertyAccess(key)} ${problem}`, {
        property: key,
      });
    }
    try {
      values[key] = deserialize(withoutNaNIdentities(structuredClone(encoded)) as SuperJSONDocument);
    } catch (error) {
      if (MossError.is(error)) throw error;
      throw new MossError(
        "context-invalid",
        `properties${propertyAccess(key)} cannot be decoded: ${error instanceof Error ? error.message : String(error)}`,
        { property: key },
        { cause: error },
      );
    }
    const oversized = expandedSizeProblem(values[key], options.maxBytes ?? DEFAULT_LIMITS.maxResultBytes);
    if (oversized !== undefined) {
      throw new MossError("context-invalid", `properties${propertyAccess(key)} ${oversized}`, {
        property: key,
      });
    }
  }
  return values;
}

interface SuperJSONDocument {
  json: unknown;
  meta?: { values?: unknown; referentialEqualities?: unknown; v?: unknown };
}

/** superjson's decoding, with its referential equalities applied here (see referential-equalities.ts). */
function deserialize(document: SuperJSONDocument): unknown {
  const { referentialEqualities, ...meta } = document.meta ?? {};
  const decode = (json: unknown) => serializer.deserialize({ json, meta } as never);
  // Truthy, as superjson tests it: a document it would decode keeps decoding.
  return referentialEqualities
    ? decodeWithReferentialEqualities(document.json, referentialEqualities, meta.v ?? 0, decode)
    : decode(document.json);
}

/**
 * superjson gives NaN an identity (its isPrimitive excludes NaN), so two NaNs in one value are written as a
 * "referential equality", and applying it on decode drops Map entries keyed by NaN. A NaN is a number, never a
 * shared object: equalities whose source is annotated as a number are removed before decoding.
 */
function withoutNaNIdentities(encoded: unknown): unknown {
  const meta = (encoded as SuperJSONDocument).meta;
  // With a shared root, superjson writes [root paths, other equalities].
  const equalities = Array.isArray(meta?.referentialEqualities)
    ? meta.referentialEqualities[1]
    : meta?.referentialEqualities;
  if (typeof equalities !== "object" || equalities === null || Array.isArray(equalities)) return encoded;
  for (const source of Object.keys(equalities)) {
    if (annotationAt(meta!.values, source) === "number")
      delete (equalities as Record<string, unknown>)[source];
  }
  return encoded;
}

/** The type annotation superjson's `meta.values` tree holds for an (escaped, dotted) path, if any. */
function annotationAt(tree: unknown, path: string): unknown {
  if (Array.isArray(tree)) return path === "" ? tree[0] : annotationAt(tree[1], path);
  if (typeof tree !== "object" || tree === null) return undefined;
  for (const [key, child] of Object.entries(tree)) {
    if (!Array.isArray(child)) continue;
    if (key === path) return child[0];
    if (path.startsWith(`${key}.`)) {
      const found = annotationAt(child[1], path.slice(key.length + 1));
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/**
 * A bigint is rebuilt from decimal text, which is quadratic: an encoded value annotating a bigint is refused when
 * its JSON holds a decimal string over the digit bound (checked before superjson parses anything).
 */
function oversizedBigintProblem(encoded: unknown): string | undefined {
  const meta = (encoded as { meta?: unknown }).meta;
  if (meta === undefined || !JSON.stringify(meta).includes('"bigint"')) return undefined;
  const pending: unknown[] = [(encoded as { json: unknown }).json];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === "string") {
      if (item.length > WIRE_MAX_BIGINT_DIGITS + 1 && /^-?\d+$/.test(item)) {
        return `holds a bigint of more than ${WIRE_MAX_BIGINT_DIGITS} digits`;
      }
    } else if (typeof item === "object" && item !== null) {
      for (const child of Object.values(item)) pending.push(child);
    }
  }
  return undefined;
}

/**
 * Why a value is not a persisted document, or undefined when it is one: in version 1 a superjson document
 * `{ json, meta? }`; from version 2 on, a wire document `{ wire }` too.
 */
export function encodedValueProblem(encoded: unknown, version: 1 | 2 = 1): string | undefined {
  const expected = version === 1 ? "{ json, meta? }" : "{ wire } or { json, meta? }";
  if (typeof encoded !== "object" || encoded === null || Array.isArray(encoded)) {
    return `must be an encoded value ${expected}`;
  }
  if (version !== 1 && isWireDocument(encoded)) return wireDocumentProblem(encoded);
  if (!Object.hasOwn(encoded, "json")) return `must be an encoded value ${expected} (json is missing)`;
  const meta = (encoded as { meta?: unknown }).meta;
  if (meta !== undefined && (typeof meta !== "object" || meta === null || Array.isArray(meta))) {
    return "has a meta that is not an object";
  }
  return undefined;
}

function findUnpersistable(value: unknown, path: string, seen: Set<object>): string | undefined {
  if (typeof value === "function") return `${path} is a function`;
  if (typeof value === "symbol") return `${path} is a symbol`;
  if (typeof value !== "object" || value === null) return undefined;
  if (types.isProxy(value)) return `${path} is a proxy`;
  if (seen.has(value)) return undefined;
  seen.add(value);
  const prototype = Object.getPrototypeOf(value) as object | null;
  if (prototype === Date.prototype && Number.isNaN((value as Date).getTime())) {
    return `${path} is an invalid Date (superjson would restore it as null)`;
  }
  if (prototype !== null && FAITHFUL_PROTOTYPES.has(prototype)) return undefined;
  if (binaryKind(value) !== undefined) return undefined;
  if (prototype === Array.prototype) {
    const array = value as unknown[];
    for (let index = 0; index < array.length; index++) {
      const problem = findUnpersistable(array[index], `${path}[${index}]`, seen);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }
  if (prototype === Map.prototype) {
    let index = 0;
    for (const [key, item] of value as Map<unknown, unknown>) {
      const problem =
        findUnpersistable(key, `${path} (key ${index})`, seen) ??
        findUnpersistable(item, `${path}.get(${describeKey(key, index)})`, seen);
      if (problem !== undefined) return problem;
      index++;
    }
    return undefined;
  }
  if (prototype === Set.prototype) {
    let index = 0;
    for (const item of value as Set<unknown>) {
      const problem = findUnpersistable(item, `${path} (item ${index})`, seen);
      if (problem !== undefined) return problem;
      index++;
    }
    return undefined;
  }
  if (prototype === Object.prototype || prototype === null) {
    for (const key of Reflect.ownKeys(value)) {
      if (typeof key === "symbol") return `${path} has a symbol key ${key.toString()}`;
      const descriptor = Object.getOwnPropertyDescriptor(value, key)!;
      const keyPath = `${path}${propertyAccess(key)}`;
      if (descriptor.get !== undefined || descriptor.set !== undefined)
        return `${keyPath} is a getter/setter`;
      if (!descriptor.enumerable) return `${keyPath} is not enumerable`;
      const problem = findUnpersistable(descriptor.value, keyPath, seen);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }
  if (value instanceof Error) return `${path} is an Error (persist its message instead)`;
  const className = (prototype as { constructor?: { name?: string } }).constructor?.name;
  return `${path} is an instance of ${className || "an anonymous class"}`;
}

function describeKey(key: unknown, index: number): string {
  if (typeof key === "string") return JSON.stringify(key);
  if (typeof key === "number" || typeof key === "boolean") return String(key);
  if (typeof key === "bigint") return `${key}n`;
  return `<key ${index}>`;
}
