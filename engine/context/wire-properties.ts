import { MossError } from "../errors.ts";
import { decodeWire, encodeWireFields, splitWireRecord } from "../membrane/index.ts";
import { DEFAULT_LIMITS } from "../types.ts";

/*
 * Context version 2 (issue 17): a data field is persisted as the membrane's wire text of its value, the encoding the
 * isolate already produces when it sends a changed field, so the host stores what it received without building
 * the value and encoding it again. Version 1 documents (superjson `{ json, meta? }`, see encode-properties.ts) are
 * still read, and a version 2 context may keep one for a field nothing has written since (an undeclared field).
 */

/** The context version this engine writes once a property holds a wire document. */
export const CONTEXT_VERSION = 2;

/**
 * The persisted form of a data field since context version 2: the wire text of the one-field record
 * `{ [field]: value }` (plain data, no handles), the very text the isolate sends when only that field changed.
 */
export interface WireDocument {
  wire: string;
}

/** A data field's one-field record wire text as its persisted document. */
export function wireDocument(wire: string): WireDocument {
  return { wire };
}

/** Whether a persisted property is a wire document `{ wire }` (version 2) rather than a superjson one. */
export function isWireDocument(encoded: unknown): encoded is WireDocument {
  return (
    typeof encoded === "object" &&
    encoded !== null &&
    !Array.isArray(encoded) &&
    Object.hasOwn(encoded, "wire") &&
    !Object.hasOwn(encoded, "json")
  );
}

/** Why a wire document is malformed (its text is checked when decoded), or undefined. */
export function wireDocumentProblem(encoded: WireDocument): string | undefined {
  return typeof encoded.wire === "string" ? undefined : "has a wire that is not a string";
}

/** The version a context with these properties is written as: 2 once any holds a wire document, else 1. */
export function contextVersion(properties: Record<string, unknown>): 1 | 2 {
  for (const encoded of Object.values(properties)) if (isWireDocument(encoded)) return CONTEXT_VERSION;
  return 1;
}

/** Decodes a wire document on the host, bounded like a snapshot; a fault is MossError `context-invalid`. */
export function decodeWireDocument(
  key: string,
  encoded: WireDocument,
  access: string,
  maxBytes: number,
): unknown {
  const problem = wireDocumentProblem(encoded);
  if (problem !== undefined)
    throw new MossError("context-invalid", `properties${access} ${problem}`, { property: key });
  let record: Record<string, unknown>;
  try {
    record = decodeWire(encoded.wire, { maxExpandedBytes: maxBytes }) as Record<string, unknown>;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    const message = MossError.is(error, "wire-limit")
      ? `properties${access} ${reason.replace(/^value /, "")}`
      : `properties${access} cannot be decoded: ${reason}`;
    throw new MossError("context-invalid", message, { property: key }, { cause: error });
  }
  const fields = typeof record === "object" && record !== null ? Object.keys(record) : [];
  if (fields.length !== 1 || Object.getPrototypeOf(record) !== Object.prototype) {
    throw new MossError(
      "context-invalid",
      `properties${access} cannot be decoded: its wire text is not a record of one field`,
      { property: key },
    );
  }
  return record[fields[0]!];
}

/** Options of `encodeWireProperties`. */
export interface EncodeWirePropertiesOptions {
  /** Encoded properties of the previous context: a field that cannot be persisted keeps its value from here. */
  previous?: Record<string, unknown>;
  /** Prefix of field paths in warnings. Default `moss`. */
  pathPrefix?: string;
  /** Bound of the fields' expanded size, all together (as a snapshot is bounded). Default: the result limit. */
  maxBytes?: number;
}

/** What `encodeWireProperties` gives: the documents, a warning per field not persisted, each new document's size. */
export interface EncodedWireProperties {
  properties: Record<string, unknown>;
  warnings: string[];
  /** The expanded size of each field written now (a field that kept its previous document has none). */
  expandedBytes: Record<string, number>;
}

/**
 * Encodes host values of data fields as wire documents, with the membrane's codec (plain data only, never a
 * handle). A field that cannot be persisted (no plain-data form, over a bound) is left out, keeping its previous
 * document when there is one, and named in a warning.
 */
export function encodeWireProperties(
  values: Record<string, unknown>,
  options: EncodeWirePropertiesOptions = {},
): EncodedWireProperties {
  const prefix = options.pathPrefix ?? "moss";
  const maxBytes = options.maxBytes ?? DEFAULT_LIMITS.maxResultBytes;
  const properties: Record<string, unknown> = {};
  const warnings: string[] = [];
  const expandedBytes: Record<string, number> = {};
  const refuse = (field: string, reason: string) => {
    const keeps = options.previous !== undefined && Object.hasOwn(options.previous, field);
    if (keeps) properties[field] = options.previous![field];
    warnings.push(
      `${prefix}.${field} ${reason}; it was not persisted${keeps ? " and keeps its previous value" : ""}`,
    );
  };
  const record = encodeWireFields(values, Object.keys(values), {
    maxExpandedBytes: maxBytes,
    rootPath: prefix,
    onRefused: refuse,
  });
  splitWireRecord(record, {
    maxExpandedBytes: maxBytes,
    onRefused: refuse,
    onField: (field, wire, size) => {
      properties[field] = wireDocument(wire);
      expandedBytes[field] = size;
    },
  });
  return { properties, warnings, expandedBytes };
}
