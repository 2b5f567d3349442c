import type { HandleShape } from "../protocol.ts";
import { decode } from "./decode.ts";
import { encode, encodeFields } from "./encode.ts";
import { measure } from "./measure.ts";
import { sameWireValue } from "./same-wire-value.ts";
import { describe, MAX_BIGINT_DIGITS, MAX_DEPTH } from "./values.ts";

/*
 * The wire encoding: everything that crosses host <-> sandbox process <-> isolate is a string in this format.
 *
 * The text is a JSON array of nodes; node 0 is the root. A node is a JSON string, boolean, null or finite
 * number standing for itself, or a tagged array whose children are indices of other nodes (so shared and
 * cyclic references survive):
 *   ["U"] undefined · ["N", "NaN" | "Infinity" | "-Infinity" | "-0"] · ["B", digits] bigint
 *   ["A", i...] array · ["O", key, i, key, i...] plain object · ["D", ms | null] Date · ["R", source, flags]
 *   ["M", k, v, ...] Map · ["S", i...] Set · ["E", name, message, code?] Error · ["H", shape] host handle
 *   ["T", kind, base64] a copy of binary data: a typed array of `kind`, an "ArrayBuffer" or a "DataView" (a Node
 *   Buffer travels as the Uint8Array of exactly its own bytes, never its pool)
 *
 * Limits bound the EXPANDED value, not the wire text: shared references are written once but a decoder that
 * builds them, or a host that formats or persists them, walks every occurrence. `measure` sizes every node once
 * (memoised, in linear time of the wire) as if shared nodes were copied, and stops at the first node past the
 * budget; bigints count their decimal digits and are capped at MAX_BIGINT_DIGITS, nesting at MAX_DEPTH levels.
 *
 * The codec runs in both realms: on the host (host/host-wire.ts wraps it) and inside the isolate (bundled into the
 * isolate script, membrane/isolate/). Every built-in it calls was captured once, in intrinsics.ts, when the module
 * was evaluated: inside the isolate that is at the top of the script, before any model code. Files: encode.ts,
 * decode.ts, measure.ts (the expanded size; parse), values.ts (bounds, binary data, descriptions).
 */

/** What the codec reports about a value it cannot encode: its path (e.g. `moss.callback`) and what it is. */
export interface WireUnsupported {
  path: string;
  description: string;
  /** Set for a Proxy or a getter met by a guarded encode (`isProxy`): reading it would run the code it holds. */
  opaque?: true;
}

/** Options of the raw codec `encode` (shared by the host module and the isolate bootstrap). */
export interface WireEncodeOptions {
  /** Path of the root in messages, e.g. `moss.notes` or `argument 0`. Default `value`. */
  rootPath?: string;
  /** Consulted first for every object: a handle for a known proxy, `null` for one that may not cross here. */
  knownHandle?: (value: object) => HandleShape | null | undefined;
  /** Turns a value that is not plain data into a handle, or returns undefined when it cannot cross. */
  handleOf?: (value: object, path: string) => HandleShape | undefined;
  /** Receives values that cannot cross; they are left out (undefined in arrays). Without it, encoding throws. */
  onUnsupported?: (unsupported: WireUnsupported) => void;
  /** Upper bound on the encoded length in characters; beyond it a `WireLimitError` is thrown. */
  maxLength?: number;
  /** Upper bound on the expanded size (see `measure`); beyond it a `WireLimitError` is thrown. */
  maxExpanded?: number;
  /**
   * Guards the encode: no code of the value runs. A Proxy this says was made by model code, and a getter (own, or of
   * an error's inherited name/message), are not read but reported as unsupported with `opaque` (`encodeFields` refuses
   * the field); an array's hole is read as undefined without looking at its prototypes; a RegExp's flags are read
   * through the captured flag getters.
   */
  isProxy?: (value: object) => boolean;
}

/** Options of `encodeFields`: each field is bounded on its own and a field that does not fit is left out. */
export interface WireFieldsOptions extends Omit<WireEncodeOptions, "onUnsupported"> {
  /** A field left out: over a limit, or holding a value that cannot cross (`reason` says which). */
  onRefused: (field: string, reason: string) => void;
  /** Receives values inside a field that cannot cross; the field is kept without them. Without it, the field is refused. */
  onUnsupported?: (unsupported: WireUnsupported) => void;
  /** A field written: its expanded size (as counted against `maxExpanded`) and the encoded length it was charged. */
  onEncoded?: (field: string, expanded: number, length: number) => void;
}

/** Options of the raw codec `decode`. */
export interface WireDecodeOptions {
  /** Builds the value standing for a handle (a proxy inside the isolate, the host object on the host). */
  onHandle?: (shape: HandleShape) => unknown;
  /** Upper bound on the expanded size, checked on the parsed wire before anything is built. */
  maxExpanded?: number;
  /** Decode a record field by field: a field over the budget is left out and reported here (root must be an object). */
  onRefused?: (field: string, reason: string) => void;
  /** With `onRefused`: a field built, with its expanded size as counted against `maxExpanded`. */
  onDecoded?: (field: string, expanded: number) => void;
  /** Called each time a node is reached again (a shared object or a cycle). */
  onShared?: () => void;
}

/** The codec produced by `createWireCodec`. */
export interface WireCodec {
  encode(value: unknown, options?: WireEncodeOptions): string;
  /** Encodes `record[field]` for each field into one wire object, refusing each field that does not fit on its own. */
  encodeFields(
    record: object,
    fields: readonly string[],
    options: WireFieldsOptions,
  ): {
    text: string;
    expanded: number;
    /** The node table the text was written from (node 0 the record), e.g. for `sameWireValue` next time. */
    nodes: unknown[];
    /** Whether the table reaches a node from more than one place (a shared object or a cycle). */
    shares: boolean;
  };
  decode(text: string, options?: WireDecodeOptions): unknown;
  /** Expanded size of wire text (throws a `WireLimitError` past `maxExpanded`, a TypeError for malformed text). */
  measure(text: string, maxExpanded?: number): number;
  /** Whether a value would encode to the same wire as node `index` of an encoder's table (plain data only; see same-wire-value.ts). */
  sameWireValue(
    current: unknown,
    table: readonly unknown[],
    index: number,
    isHostObject: (value: object) => boolean,
    tableShares: boolean,
    isProxy?: (value: object) => boolean,
  ): boolean;
  /** Readable description of a value that cannot cross ("a function", "an instance of Point", ...). */
  describe(value: unknown): string;
  /** The fixed bounds every value obeys. */
  readonly bounds: { readonly maxDepth: number; readonly maxBigIntDigits: number };
}

/** Builds the wire codec from the intrinsics of the realm it runs in; self-contained (see the file comment). */

/** The codec as one object: the functions of encode.ts, decode.ts and measure.ts (the same in both realms). */
export function createWireCodec(): WireCodec {
  return {
    encode,
    encodeFields,
    decode,
    measure,
    sameWireValue,
    describe,
    bounds: { maxDepth: MAX_DEPTH, maxBigIntDigits: MAX_BIGINT_DIGITS },
  };
}
