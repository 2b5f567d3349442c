// The data snapshot at the end of a run: the `moss` data fields that changed since the host last received them,
// encoded within the result budget; a field whose value would encode exactly as the host's copy is not sent again
// (the host keeps what it has, and the sizes still count).
import {
  MapCtor,
  MapDelete,
  MapGet,
  MapSet,
  ObjectCreate,
  ObjectHasOwn,
  ObjectLookupGetter,
  ReflectApply,
  ReflectDefineProperty,
  ReflectDeleteProperty,
} from "../wire/intrinsics.ts";
import { isModelProxy } from "./lockdown.ts";
import { knownHandle } from "./proxy-shapes.ts";
import { append, field } from "./records.ts";
import type { IsolateState, SavedField } from "./state.ts";

// Encoded text may be this many times longer than the expanded-size budget (indices, tags): a first, cheap bound.
export const WIRE_SLACK = 4;

// Warnings about values left out of a snapshot are capped below the host's own cap (model code decides how many
// there are), so the refusals, listed first, and the count of the rest always reach the host.
const MAX_SNAPSHOT_WARNINGS = 30;

const isHostObject = (value: object) => knownHandle(value) !== undefined;

function warn(warnings: string[], text: string, dropped: { count: number }): void {
  if (warnings.length < MAX_SNAPSHOT_WARNINGS) append(warnings, text);
  else dropped.count++;
}

/**
 * The data fields the snapshot covers: those present on `moss` and any that lived there (installed, or set by the
 * code since). One that was never there (refused when installed) is left out while it stays absent: the host keeps
 * its saved value.
 */
function presentFields(state: IsolateState): string[] {
  const present: string[] = [];
  for (let i = 0; i < state.dataFields.length; i++) {
    const name = state.dataFields[i]!;
    if (ObjectHasOwn(state.moss, name)) ReflectApply(MapSet, state.knownFields, [name, true]);
    if (ReflectApply(MapGet, state.knownFields, [name]) === true) append(present, name);
  }
  return present;
}

/** Whether the field's value would encode exactly as the host's copy (never touched, or compared node by node). */
function unchanged(state: IsolateState, name: string, entry: SavedField): boolean {
  if (ReflectApply(MapGet, state.touched, [name]) !== true) return true;
  try {
    // A getter on `moss` itself is not read here: the encoder refuses it.
    return (
      ReflectApply(ObjectLookupGetter, state.moss, [name]) === undefined &&
      state.codec.sameWireValue(
        state.moss[name],
        entry.nodes as unknown[],
        entry.index as number,
        isHostObject,
        entry.shares === true,
        isModelProxy,
      )
    );
  } catch {
    return false;
  }
}

/** The fields present split into those to encode and the sizes of those kept, within `budget`. */
function changedFields(
  state: IsolateState,
  budget: number,
): { changed: string[]; remaining: number; keptExpanded: number; keptLength: number } {
  const present = presentFields(state);
  const changed: string[] = [];
  let remaining = budget;
  let keptExpanded = 0;
  let keptLength = 0;
  for (let i = 0; i < present.length; i++) {
    const name = present[i]!;
    const entry = ReflectApply(MapGet, state.saved, [name]) as SavedField | undefined;
    if (entry?.hasCopy && (entry.expanded as number) <= remaining && unchanged(state, name, entry)) {
      remaining -= entry.expanded as number;
      keptExpanded += entry.expanded as number;
      keptLength += entry.length as number;
    } else append(changed, name);
  }
  return { __proto__: null, changed, remaining, keptExpanded, keptLength } as any;
}

/**
 * Encodes the data fields present on `moss` that changed since the host last received them, each bounded on its
 * own (its expanded size against what is left of the result budget, its depth, its bigints); an unchanged field
 * is charged the size it had. A refused field is named in a warning and set back to its last saved value, so the
 * isolate and the persisted context agree; a field deleted by the code is left as it was.
 */
export function snapshotData(
  state: IsolateState,
  warnings: string[],
  budget: number,
): { text: string; expanded: number; length: number } {
  const { codec, moss } = state;
  const { changed, remaining, keptExpanded, keptLength } = changedFields(state, budget);
  const refused: string[] = [];
  const refusals: string[] = [];
  const leftOut: string[] = [];
  const dropped = { __proto__: null, count: 0 };
  let sizes: unknown[] = [];
  const onEncoded = (name: string, expanded: number, length: number) => {
    append(sizes, name);
    append(sizes, expanded);
    append(sizes, length);
  };
  const options = {
    __proto__: null,
    rootPath: "moss",
    knownHandle: (value: object) => (knownHandle(value) === undefined ? undefined : null),
    onUnsupported: (unsupported: { path: string; description: string }) =>
      warn(leftOut, `${unsupported.path} is ${unsupported.description} and was not persisted`, dropped),
    onRefused: (name: string, reason: string) => {
      append(refused, name);
      append(refusals, `moss.${name} ${reason}; it was not persisted and keeps its last saved value`);
    },
    onEncoded,
    maxLength: WIRE_SLACK * budget - keptLength,
    maxExpanded: remaining,
    isProxy: isModelProxy,
  };
  let snapshot = codec.encodeFields(moss, changed, options as any);
  if (refused.length > 0) {
    restoreFields(state, refused);
    sizes = [];
    const quiet = {
      __proto__: null,
      rootPath: "moss",
      knownHandle: options.knownHandle,
      onUnsupported: () => {},
      onRefused: () => {},
      onEncoded,
      maxLength: options.maxLength,
      maxExpanded: options.maxExpanded,
      isProxy: isModelProxy,
    };
    const still: string[] = [];
    for (let i = 0; i < changed.length; i++) {
      if (ReflectApply(MapGet, state.knownFields, [changed[i]]) === true) append(still, changed[i]);
    }
    snapshot = codec.encodeFields(moss, still, quiet as any);
  }
  for (let i = 0; i < refusals.length; i++) append(warnings, refusals[i]);
  for (let i = 0; i < leftOut.length; i++) append(warnings, leftOut[i]);
  if (dropped.count > 0) append(warnings, `… and ${dropped.count} more values that were not persisted`);
  if (sizes.length > 0) keepEncoded(state, snapshot, sizes);
  return {
    text: snapshot.text,
    expanded: snapshot.expanded + keptExpanded,
    length: snapshot.text.length + keptLength,
  };
}

/** Remembers what the host now holds of each field encoded: `sizes` lists field, expanded size and length. */
function keepEncoded(
  state: IsolateState,
  snapshot: { text: string; nodes: unknown[]; shares: boolean },
  sizes: unknown[],
): void {
  // The record's node lists each field written and the node of its value.
  const root = snapshot.nodes[0] as unknown[];
  const indexOf = new MapCtor<string, number>();
  for (let i = 1; i + 1 < root.length; i += 2) ReflectApply(MapSet, indexOf, [root[i], root[i + 1]]);
  for (let i = 0; i + 2 < sizes.length; i += 3) {
    const name = sizes[i] as string;
    ReflectApply(MapSet, state.saved, [
      name,
      {
        __proto__: null,
        text: snapshot.text,
        hasCopy: true,
        nodes: snapshot.nodes,
        index: ReflectApply(MapGet, indexOf, [name]),
        shares: snapshot.shares,
        expanded: sizes[i + 1],
        length: sizes[i + 2],
      },
    ]);
  }
}

/** Sets refused fields back to their last saved value, or back to absent when none was saved. */
function restoreFields(state: IsolateState, names: string[]): void {
  for (let i = 0; i < names.length; i++) {
    const name = names[i]!;
    try {
      const entry = ReflectApply(MapGet, state.saved, [name]) as SavedField | undefined;
      let values: any = ObjectCreate(null);
      if (entry !== undefined) values = state.codec.decode(entry.text, state.decodeOptions);
      if (ObjectHasOwn(values, name)) {
        ReflectDefineProperty(state.moss, name, field(values[name]));
      } else {
        // No saved value inside: the field goes back to absent, and the host keeps whatever it holds.
        ReflectDeleteProperty(state.moss, name);
        ReflectApply(MapDelete, state.knownFields, [name]);
      }
    } catch {}
  }
}
