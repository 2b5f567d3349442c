import {
  decodeProperties,
  encodeWireProperties,
  partitionProperties,
  type WireDocument,
  wireDocument,
} from "../context/index.ts";
import { encodeWireFields, joinWireRecords, splitWireRecord } from "../membrane/index.ts";
import type { CompiledModule } from "../module/index.ts";
import { dataFieldMisfits } from "../module/index.ts";

/** A data field as persisted: its wire text (checked, plain data) and its expanded size. */
class PersistedWire {
  constructor(
    readonly wire: string,
    readonly expandedBytes: number,
  ) {}
}

/**
 * The data fields of one session (`moss`'s declared data): what a new isolate installs, what the snapshot a run
 * left changed, and what the context persists. A field is a host value, or (once persisted) the wire text it was
 * persisted as, never decoded here: the isolate's text is checked and stored as sent.
 */
export class SessionData {
  readonly #fields: readonly string[];
  readonly #declaredTypes: CompiledModule["analysis"]["declaredTypes"];
  #values: Record<string, unknown> = {};
  /** The wire snapshot of the data fields last persisted cleanly (a run leaving the same text changed nothing). */
  #persistedSnapshot: { wire: string; maxBytes: number } | undefined;
  /**
   * The expanded size of each data field as the sandbox last sent it: a snapshot carries only the fields that
   * changed, and with the ones it left out it stays within the result limit.
   */
  readonly #fieldSizes = new Map<string, number>();
  /** Whether the last persist saved every field it was given (else the next one encodes every field again). */
  #persistedClean = false;
  /** Data fields refused when the session was installed, reported with the next execution. */
  readonly installWarnings: string[] = [];

  constructor(module: CompiledModule) {
    this.#fields = (module.analysis.mossClass?.fields ?? [])
      .filter((field) => field.kind === "data")
      .map((field) => field.name);
    this.#declaredTypes = module.analysis.declaredTypes;
  }

  /** The names of the declared data fields. */
  fields(): string[] {
    return [...this.#fields];
  }

  /** Takes the data the compiler made (the initial data fields) as they are. */
  replace(data: Record<string, unknown>): void {
    this.#values = data;
    this.#forgetSnapshot();
  }

  /**
   * Takes the data fields back from the host-side moss (after `__moss_compiled__`), but `leftOut`: fields the host
   * left undefined where their type has no room for it (`when!: Date`) are not stored.
   */
  adopt(moss: Record<string, unknown>, leftOut: readonly string[]): void {
    for (const field of this.#fields) if (field in moss) this.#values[field] = moss[field];
    for (const field of leftOut) delete this.#values[field];
    this.#forgetSnapshot();
  }

  /** Starts over from the data as they were when a paused run first began (its continuation's properties). */
  restore(properties: Record<string, unknown>, maxBytes: number): void {
    this.#values = {
      ...this.#values,
      ...decodeProperties(partitionProperties(properties, this.fields()).declared, { maxBytes }),
    };
    this.#forgetSnapshot();
  }

  #forgetSnapshot(): void {
    this.#persistedSnapshot = undefined;
    this.#fieldSizes.clear();
  }

  /**
   * The data fields as one wire record for a new isolate: a persisted field's wire text as it is, a host value
   * encoded (plain data only: a value with no plain-data form is refused by name, never turned into a handle).
   */
  installWire(maxBytes: number): string {
    const texts = new Map<string, string>();
    const values: Record<string, unknown> = {};
    let remaining = maxBytes;
    const refuse = (field: string, reason: string) =>
      this.installWarnings.push(
        `moss.${field} ${reason}; it is not available inside the sandbox and keeps its saved value`,
      );
    for (const [field, value] of Object.entries(this.#values)) {
      if (!(value instanceof PersistedWire)) {
        values[field] = value;
        continue;
      }
      if (value.expandedBytes > remaining) {
        refuse(field, `is larger than the limit of ${maxBytes} bytes once expanded`);
        continue;
      }
      remaining -= value.expandedBytes;
      texts.set(field, value.wire);
      // The isolate sends an installed field back only once it changes: its size counts until then.
      this.#fieldSizes.set(field, value.expandedBytes);
    }
    if (Object.keys(values).length > 0) {
      const encoded = encodeWireFields(values, Object.keys(values), {
        maxExpandedBytes: remaining,
        onEncoded: (field, expandedBytes) => this.#fieldSizes.set(field, expandedBytes),
        onRefused: refuse,
      });
      splitWireRecord(encoded, { onRefused: refuse, onField: (field, wire) => texts.set(field, wire) });
    }
    return joinWireRecords(
      Object.keys(this.#values)
        .filter((field) => texts.has(field))
        .map((field) => texts.get(field)!),
    );
  }

  /** Whether a run left the data exactly as the last snapshot persisted cleanly (same wire text, same limit). */
  unchanged(snapshot: string | undefined, maxBytes: number): boolean {
    const persisted = this.#persistedSnapshot;
    return (
      snapshot !== undefined &&
      persisted !== undefined &&
      persisted.wire === snapshot &&
      persisted.maxBytes === maxBytes
    );
  }

  /**
   * Takes the fields the snapshot a run left carries (the sandbox leaves out those that did not change since it last
   * sent them): each field's wire text is checked and kept as sent, never built into a value. Nothing is taken when
   * they exceed the limit; a field that does not fit its declared type is refused (`misfit`: the isolate holds it).
   * Returns the fields taken (undefined when none could be), for the persist.
   */
  take(
    snapshot: string,
    maxBytes: number,
    warnings: string[],
  ): { changed: string[] | undefined; misfit: boolean } {
    const sizes = new Map<string, number>();
    const data: Record<string, PersistedWire> = {};
    splitWireRecord(snapshot, {
      maxExpandedBytes: maxBytes,
      onRefused: (field, reason) => warnings.push(refusedFieldWarning(field, reason)),
      onField: (field, wire, size) => {
        sizes.set(field, size);
        data[field] = new PersistedWire(wire, size);
      },
    });
    const problem = this.#oversized(sizes, maxBytes);
    if (problem !== undefined) {
      warnings.push(problem);
      return { changed: undefined, misfit: false };
    }
    let misfit = false;
    for (const field of this.#refuseMisfits(data, maxBytes, warnings)) {
      delete data[field];
      sizes.delete(field);
      misfit = true;
    }
    this.#values = { ...this.#values, ...data };
    for (const [field, size] of sizes) this.#fieldSizes.set(field, size);
    return { changed: Object.keys(data), misfit };
  }

  /**
   * The context's properties with the data fields written as wire documents: only `fields` (those a snapshot
   * carried) when given and the last persist saved every field, else every field (the others keep their stored form,
   * which nothing changed). A field the isolate sent is stored as its wire text, never decoded; a host value is
   * encoded with the same codec, and the session keeps the text it was persisted as in its place.
   */
  persist(
    previous: Record<string, unknown>,
    warnings: string[],
    maxBytes: number,
    fields?: readonly string[],
  ): Record<string, unknown> {
    const partial = fields !== undefined && this.#persistedClean;
    const names = partial ? fields : Object.keys(this.#values);
    const properties: Record<string, unknown> = {};
    const values: Record<string, unknown> = {};
    for (const field of names) {
      const value = this.#values[field];
      if (value instanceof PersistedWire) properties[field] = wireDocument(value.wire);
      else values[field] = value;
    }
    let clean = true;
    if (Object.keys(values).length > 0) {
      const encoded = encodeWireProperties(values, { previous, maxBytes });
      warnings.push(...encoded.warnings);
      clean = encoded.warnings.length === 0;
      Object.assign(properties, encoded.properties);
      // From now on the field is what was persisted: a new isolate starts from that text, never encoded again.
      const data = { ...this.#values };
      for (const [field, size] of Object.entries(encoded.expandedBytes))
        data[field] = new PersistedWire((encoded.properties[field] as WireDocument).wire, size);
      this.#values = data;
    }
    this.#persistedClean = clean;
    const stored = partitionProperties(previous, this.fields());
    return { ...stored.undeclared, ...(partial ? stored.declared : {}), ...properties };
  }

  /** Keeps the snapshot a run left as persisted cleanly (undefined: it was not, the next run's is decoded again). */
  persisted(snapshot: { wire: string; maxBytes: number } | undefined): void {
    this.#persistedSnapshot = snapshot;
  }

  /**
   * The write side of the rule a context is read by (`dataFieldMisfits`, which `restoreContext` calls too): each field
   * a run changed must fit its declared type once decoded as a later compile decodes it. A field that does not is
   * refused by name (a warning of the execution says which and why) and keeps its last saved value, so a context the
   * engine wrote always loads again. Returns the refused fields.
   */
  #refuseMisfits(data: Record<string, PersistedWire>, maxBytes: number, warnings: string[]): string[] {
    const misfits = dataFieldMisfits(
      this.#declaredTypes,
      Object.keys(data),
      (field) => decodeProperties({ [field]: wireDocument(data[field]!.wire) }, { maxBytes })[field],
    );
    for (const { field, problem } of misfits)
      warnings.push(refusedFieldWarning(field, `does not fit its declared type (${problem})`));
    return misfits.map((misfit) => misfit.field);
  }

  /** Why the data fields a snapshot carried, with those it left unchanged, exceed the limit (undefined: they fit). */
  #oversized(sizes: ReadonlyMap<string, number>, maxBytes: number): string | undefined {
    let total = 2;
    for (const size of sizes.values()) total += size;
    for (const [field, size] of this.#fieldSizes) if (!sizes.has(field)) total += size;
    if (total <= maxBytes) return undefined;
    return `moss data is larger than the limit of ${maxBytes} bytes once expanded; it was not persisted and keeps its last saved value`;
  }
}

function refusedFieldWarning(field: string, reason: string): string {
  return `moss.${field} ${reason}; it was not persisted and keeps its last saved value`;
}
