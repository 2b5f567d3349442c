import { MossError } from "../../errors.ts";
import { DEFAULT_LIMITS } from "../../types.ts";
import type { HandleShape } from "../protocol.ts";
import { createWireCodec, type WireUnsupported } from "../wire/codec.ts";
import { createMeasurer, parse } from "../wire/measure.ts";

/*
 * The host's use of the wire codec (../wire/codec.ts, the one encoding for everything that crosses host <->
 * sandbox process <-> isolate): codec failures become MossErrors, and decoding is bounded before anything is built.
 */

const hostCodec = createWireCodec();

/** Deepest nesting a value crossing the wire may have. */
export const WIRE_MAX_DEPTH: number = hostCodec.bounds.maxDepth;
/** Longest bigint (in decimal digits) a value crossing the wire may hold: decimal conversion is quadratic. */
export const WIRE_MAX_BIGINT_DIGITS: number = hostCodec.bounds.maxBigIntDigits;
/** Wire text is at most this many times longer than the expanded value (tags, indices; base64 for binary data). */
export const WIRE_TEXT_SLACK = 6;
/** Expanded-size budget of a decode that names none (the default result limit). */
export const DEFAULT_MAX_EXPANDED_BYTES: number = DEFAULT_LIMITS.maxResultBytes;

/** Runs a codec operation on the host: whatever it throws becomes a MossError (`wire-limit` or `wire-invalid`). */
function hostCall<T>(operation: () => T): T {
  try {
    return operation();
  } catch (error) {
    if (MossError.is(error)) throw error;
    const message = error instanceof Error ? error.message : String(error);
    const limit = error instanceof Error && error.name === "WireLimitError";
    throw new MossError(limit ? "wire-limit" : "wire-invalid", message, {}, { cause: error });
  }
}

/** Host-side options of `encodeWire`. */
export interface EncodeWireOptions {
  /** Registers a host object that is not plain data with the membrane and returns its handle shape. */
  onHostObject?: (value: object, path: string) => HandleShape | undefined;
  /** Receives values that cannot cross (they are left out); without it `encodeWire` throws. */
  onUnsupported?: (unsupported: WireUnsupported) => void;
  /** Path of the root in messages. Default `value`. */
  rootPath?: string;
}

/**
 * Encodes a host value into wire text; host objects become handles through `onHostObject`, binary data is copied.
 * Throws MossError `wire-invalid` for a value that cannot cross, `wire-limit` past the depth or bigint bounds.
 */
export function encodeWire(value: unknown, options: EncodeWireOptions = {}): string {
  return hostCall(() =>
    hostCodec.encode(value, {
      rootPath: options.rootPath,
      handleOf: options.onHostObject,
      onUnsupported: options.onUnsupported,
    }),
  );
}

/** Options of `encodeWireFields`. */
export interface EncodeWireFieldsOptions {
  /** Budget of the expanded size of all fields together; a field that does not fit is refused. */
  maxExpandedBytes?: number;
  /** Path prefix in messages. Default `moss`. */
  rootPath?: string;
  /** A field left out, with the reason (a phrase following the field's path). */
  onRefused: (field: string, reason: string) => void;
  /** A field written, with its expanded size. */
  onEncoded?: (field: string, expandedBytes: number) => void;
}

/**
 * Encodes data fields into wire text as plain data only: no handles are ever made. A field holding something with
 * no plain-data form (a class instance, a URL, a function …), or over a bound, is refused and left out.
 */
export function encodeWireFields(
  record: Record<string, unknown>,
  fields: readonly string[],
  options: EncodeWireFieldsOptions,
): string {
  return hostCall(
    () =>
      hostCodec.encodeFields(record, fields, {
        rootPath: options.rootPath ?? "moss",
        maxExpanded: options.maxExpandedBytes ?? DEFAULT_MAX_EXPANDED_BYTES,
        onRefused: options.onRefused,
        onEncoded: options.onEncoded,
      }).text,
  );
}

/** Host-side options of `decodeWire`. */
export interface DecodeWireOptions {
  /** Resolves a handle coming back from the isolate to the host object it stands for. */
  onHandle?: (shape: HandleShape) => unknown;
  /** Budget of the expanded value, checked before anything is built. Default `DEFAULT_MAX_EXPANDED_BYTES`. */
  maxExpandedBytes?: number;
  /** Decode a record field by field: a field over the budget is left out and reported here. */
  onRefused?: (field: string, reason: string) => void;
  /** With `onRefused`: a field built, with its expanded size. */
  onDecoded?: (field: string, expandedBytes: number) => void;
}

/**
 * Decodes wire text on the host, after bounding its expanded size, depth and bigints (the text comes from the
 * untrusted isolate). Throws MossError `wire-invalid` for malformed text and `wire-limit` past a bound.
 */
export function decodeWire(text: string, options: DecodeWireOptions = {}): unknown {
  const maxExpanded = options.maxExpandedBytes ?? DEFAULT_MAX_EXPANDED_BYTES;
  if (text.length > WIRE_TEXT_SLACK * maxExpanded) {
    // Not even parsed: an honest encoding of a value within the budget is never this long.
    throw new MossError(
      "wire-limit",
      `value is sent as ${text.length} characters, more than ${WIRE_TEXT_SLACK} times the limit of ${maxExpanded} bytes`,
      {},
    );
  }
  return hostCall(() =>
    hostCodec.decode(text, {
      onHandle: options.onHandle,
      maxExpanded,
      onRefused: options.onRefused,
      onDecoded: options.onDecoded,
    }),
  );
}

/** Expanded size of wire text (as if shared references were copied); throws MossError `wire-limit` past `max`. */
export function measureWire(text: string, maxExpandedBytes: number = DEFAULT_MAX_EXPANDED_BYTES): number {
  return hostCall(() => hostCodec.measure(text, maxExpandedBytes));
}

/** Describes a value that cannot cross, e.g. "a function" or "an instance of Point". */
export function describeUnsupported(value: unknown): string {
  return hostCodec.describe(value);
}

/**
 * One record of wire values encoded on their own (`[key, wire text]`), as wire text: each value keeps what it
 * encoded alone (its own handles), none shares a node with another.
 */
export function joinWireRecord(entries: ReadonlyArray<readonly [string, string]>): string {
  const nodes: unknown[] = [["O"]];
  const root = nodes[0] as unknown[];
  for (const [key, text] of entries) {
    const table = JSON.parse(text) as unknown[];
    const offset = nodes.length;
    const moved = (index: unknown) => (index as number) + offset;
    for (const node of table) {
      if (!Array.isArray(node)) {
        nodes.push(node);
        continue;
      }
      const tag = node[0];
      if (tag === "A" || tag === "M" || tag === "S") nodes.push([tag, ...node.slice(1).map(moved)]);
      else if (tag === "O") nodes.push(node.map((part, i) => (i > 0 && i % 2 === 0 ? moved(part) : part)));
      else nodes.push(node);
    }
    root.push(key, offset);
  }
  return JSON.stringify(nodes);
}

/** Options of `splitWireRecord`. */
export interface SplitWireRecordOptions {
  /** Budget of the expanded size of all fields together; a field past what is left of it is refused. */
  maxExpandedBytes?: number;
  /** A field left out (over the budget), with the reason (a phrase following the field's path). */
  onRefused: (field: string, reason: string) => void;
  /**
   * A field kept: the wire text of the one-field record `{ [field]: value }` and the field's expanded size as
   * counted against the budget. A record of one field is passed on as the very text it came in.
   */
  onField: (field: string, wire: string, expandedBytes: number) => void;
}

/**
 * Splits the wire text of a record (a data snapshot) into one-field records, without building any value: each
 * field is bounded like `decodeWire` bounds it, and every node it reaches is checked as `decodeWire` would check it
 * (no handles: a data field is plain data), so a stored text decodes later. Throws MossError `wire-invalid` for
 * malformed text.
 */
export function splitWireRecord(text: string, options: SplitWireRecordOptions): void {
  const maxExpanded = options.maxExpandedBytes ?? DEFAULT_MAX_EXPANDED_BYTES;
  if (text.length > WIRE_TEXT_SLACK * maxExpanded) {
    throw new MossError(
      "wire-limit",
      `value is sent as ${text.length} characters, more than ${WIRE_TEXT_SLACK} times the limit of ${maxExpanded} bytes`,
      {},
    );
  }
  hostCall(() => {
    const table = parse(text);
    const root = table[0];
    if (!Array.isArray(root) || root[0] !== "O") throw new TypeError("invalid wire text: expected a record");
    // The measurer checks every node it sizes as the decoder would, handles refused: a data field is plain data.
    const measurer = createMeasurer(table, true);
    const single = root.length === 3;
    let remaining = maxExpanded;
    for (let i = 1; i + 1 < root.length; i += 2) {
      const field = root[i];
      if (typeof field !== "string") throw new TypeError("invalid wire text: bad node 0");
      const index = root[i + 1] as number;
      let size: number;
      try {
        size = measurer.measure(index, 1, remaining - field.length - 4) + field.length + 4;
      } catch (error) {
        if (!(error instanceof Error) || error.name !== "WireLimitError") throw error;
        options.onRefused(field, error.message);
        continue;
      }
      remaining -= size;
      // The text itself when it is already this one-field record (checked, never copied), else a renumbered copy.
      const wire = single ? text : JSON.stringify(extractRecord(table, field, index));
      options.onField(field, wire, size);
    }
  });
}

/**
 * Merges one-field record texts (as `splitWireRecord` gives them) into one record, in the order given; each keeps
 * its own nodes (none shares a node with another).
 */
export function joinWireRecords(texts: readonly string[]): string {
  const nodes: unknown[] = [["O"]];
  const root = nodes[0] as unknown[];
  for (const text of texts) {
    const table = JSON.parse(text) as unknown[];
    const offset = nodes.length - 1;
    const record = table[0] as unknown[];
    for (let i = 1; i + 1 < record.length; i += 2) root.push(record[i], (record[i + 1] as number) + offset);
    for (let index = 1; index < table.length; index++) nodes.push(movedNode(table[index], offset));
  }
  return JSON.stringify(nodes);
}

/** A wire node with its child indices moved by `offset`. */
function movedNode(node: unknown, offset: number): unknown {
  if (!Array.isArray(node)) return node;
  const tag = node[0];
  if (tag === "A" || tag === "M" || tag === "S")
    return [tag, ...node.slice(1).map((index) => index + offset)];
  if (tag === "O") return node.map((part, i) => (i > 0 && i % 2 === 0 ? part + offset : part));
  return node;
}

/**
 * The one-field record `{ [field]: value }` of the value at `start`, as a wire table: the nodes reachable from
 * `start`, renumbered from 1 (shared and circular references kept). The measurer has checked every node it reaches
 * (indices, bounds, each leaf as the decoder builds it). No closure per node: this runs for every node of a large
 * field.
 */
function extractRecord(table: unknown[], field: string, start: number): unknown[] {
  const renumbered = new Int32Array(table.length).fill(-1);
  const order: number[] = [-1, start];
  renumbered[start] = 1;
  const out: unknown[] = [["O", field, 1]];
  let count = 2;
  for (let position = 1; position < count; position++) {
    const index = order[position]!;
    const node = table[index];
    if (!Array.isArray(node)) {
      out.push(node);
      continue;
    }
    const parts = node as unknown[];
    const length = parts.length;
    const tag = parts[0];
    if (tag === "A" || tag === "S" || tag === "O" || tag === "M") {
      const keyed = tag === "O";
      const end = tag === "O" || tag === "M" ? length - ((length - 1) % 2) : length;
      const copy: unknown[] = [tag];
      for (let i = 1; i < end; i++) {
        if (keyed && i % 2 === 1) {
          copy.push(parts[i]);
          continue;
        }
        const old = parts[i] as number;
        let target = renumbered[old]!;
        if (target === -1) {
          target = count++;
          renumbered[old] = target;
          order.push(old);
        }
        copy.push(target);
      }
      out.push(copy);
    } else {
      out.push(parts);
    }
  }
  return out;
}
