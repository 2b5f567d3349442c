/**
 * Decodes a superjson document and restores its `meta.referentialEqualities` here rather than in superjson, whose
 * pass has three faults; the document format is the same.
 *
 * - It replaces a Set member or a Map key by delete + re-add, which moves the entry to the end of its container:
 *   the order of entries changes (observable to model code), and since paths are positions (`map.3.0`), a later
 *   equality in the same container then resolves the wrong entry — one entry lost, another doubled, Map values
 *   swapped (ravionhq/superjson#357, unmerged). Here each Set and Map reached is read once into an array of
 *   entries, writes go to that array, and every container written to is rebuilt in its original order at the end.
 * - It applies equalities in document order, but the one copy of a shared object whose inner paths are written
 *   (the first met when encoding) is not always the one named as the source (the shortest path): an object
 *   shared inside it, or a reference back to the root, is set in a copy that is replaced afterwards and is lost
 *   (ravionhq/superjson#361). Here a path leading through a target leads through its source, so inner equalities
 *   land in the object that stays, whatever the order.
 * - A reference back to an ancestor is written as null, so a Set holding two of them (or one and a null), or a Map
 *   keyed by them, collapses into fewer entries when it is built. Here such nulls become placeholder objects in
 *   the JSON first, replaced like any other target.
 *
 * `decode` is superjson's decoding of the JSON without the equalities.
 */
export function decodeWithReferentialEqualities(
  json: unknown,
  annotations: unknown,
  version: unknown,
  decode: (json: unknown) => unknown,
): unknown {
  // As in superjson: a document without `v` has legacy paths, where `\\` is no escape.
  const equalities = parseEqualities(annotations, (version as number) < 1);
  const raw = new PathState(json, equalities);
  for (const [, target] of equalities) raw.fillCycleCut(target);
  const value = decode(json);
  const state = new PathState(value, equalities);
  for (const [source, target] of equalities) state.set(target, state.get(source));
  state.rebuild();
  return value;
}

/** The equalities as [source, target] paths, a shared root's source being the empty path. */
function parseEqualities(annotations: unknown, legacyPaths: boolean): Array<[string[], string[]]> {
  const equalities: Array<[string[], string[]]> = [];
  const addGroups = (groups: unknown) => {
    if (typeof groups !== "object" || groups === null || Array.isArray(groups)) {
      throw new Error("malformed referential equalities");
    }
    for (const [source, targets] of Object.entries(groups)) {
      const sourcePath = parsePath(source, legacyPaths);
      for (const target of stringList(targets)) equalities.push([sourcePath, parsePath(target, legacyPaths)]);
    }
  };
  if (Array.isArray(annotations)) {
    const [rootPaths, others] = annotations as unknown[];
    for (const target of stringList(rootPaths)) equalities.push([[], parsePath(target, legacyPaths)]);
    if (others !== undefined) addGroups(others);
  } else {
    addGroups(annotations);
  }
  return equalities;
}

function stringList(value: unknown): string[] {
  if (!Array.isArray(value) || !value.every((item) => typeof item === "string")) {
    throw new Error("malformed referential equalities");
  }
  return value;
}

type Container = Set<unknown> | Map<unknown, unknown>;

/** A path (prefix) named in the equalities: what it resolves to, and the source it takes its object from. */
interface PathNode {
  children: Map<string, PathNode>;
  source?: string[];
  resolved: boolean;
  resolving: boolean;
  value?: unknown;
}

const newNode = (): PathNode => ({ children: new Map(), resolved: false, resolving: false });

/**
 * Positional access to a decoded value. A path resolves step by step; at a step that is the target of an equality
 * it continues from that equality's source, and each step's result is remembered. The entries of each Set and
 * Map are held in arrays until `rebuild`.
 */
class PathState {
  readonly #root: PathNode;
  readonly #entries = new Map<Container, unknown[] | Array<[unknown, unknown]>>();
  readonly #written = new Set<Container>();

  constructor(value: unknown, equalities: Array<[string[], string[]]>) {
    this.#root = { ...newNode(), resolved: true, value };
    for (const [source, target] of equalities) {
      this.#node(source);
      const node = this.#node(target);
      if (node.source !== undefined)
        throw new Error(`path ${target.join(".")} is the target of two equalities`);
      node.source = source;
    }
  }

  /** The object at a path. */
  get(path: string[]): unknown {
    return this.#resolve(path, path.length);
  }

  /** Puts `value` at a path (never empty: superjson's paths have at least one segment). */
  set(path: string[], value: unknown): void {
    const parent = this.#resolve(path, undefined);
    const last = path.length - stepWidth(parent);
    const key = path[last]!;
    if (parent instanceof Set) {
      (this.#entriesOf(parent) as unknown[])[position(key, parent.size)] = value;
      this.#written.add(parent);
    } else if (parent instanceof Map) {
      const entry = (this.#entriesOf(parent) as Array<[unknown, unknown]>)[position(key, parent.size)]!;
      entry[side(path[last + 1])] = value;
      this.#written.add(parent);
    } else if (Array.isArray(parent)) {
      parent[position(key, parent.length)] = value;
    } else {
      ownProperty(parent, key);
      (parent as Record<string, unknown>)[key] = value;
    }
  }

  /** In a JSON tree (Maps and Sets still arrays): puts a fresh object at a path holding null. */
  fillCycleCut(path: string[]): void {
    const parent = this.#resolve(path, undefined);
    const key = path[path.length - 1]!;
    if (typeof parent === "object" && parent !== null && Object.hasOwn(parent, key)) {
      const holder = parent as Record<string, unknown>;
      if (holder[key] === null) holder[key] = {};
    }
  }

  /** Writes the held entries back into every Set and Map written to, in their original order. */
  rebuild(): void {
    for (const container of this.#written) {
      const entries = this.#entries.get(container)!;
      container.clear();
      if (container instanceof Set) for (const member of entries) container.add(member);
      else for (const [key, item] of entries as Array<[unknown, unknown]>) container.set(key, item);
    }
  }

  /**
   * The object at `path` when `length` is its length, or else the object holding the last step of `path` (the
   * step is one segment, or two in a Map: row and side).
   */
  #resolve(path: string[], length: number | undefined): unknown {
    let node = this.#root;
    let value = node.value;
    let index = 0;
    for (;;) {
      const width = stepWidth(value);
      if (length === undefined ? index + width === path.length : index === length) return value;
      if (index + width > path.length) throw new Error(`invalid path ${path.join(".")}`);
      const parent = value;
      for (let step = 0; step < width; step++) node = node.children.get(path[index + step]!)!;
      if (!node.resolved) {
        if (node.source !== undefined) {
          if (node.resolving) throw new Error(`circular referential equality at ${path.join(".")}`);
          node.resolving = true;
          node.value = this.#resolve(node.source, node.source.length);
        } else {
          node.value = this.#read(parent, path, index);
        }
        node.resolved = true;
      }
      value = node.value;
      index += width;
    }
  }

  #read(node: unknown, segments: string[], index: number): unknown {
    const key = segments[index]!;
    if (node instanceof Set) return (this.#entriesOf(node) as unknown[])[position(key, node.size)];
    if (node instanceof Map) {
      const entry = (this.#entriesOf(node) as Array<[unknown, unknown]>)[position(key, node.size)]!;
      return entry[side(segments[index + 1])];
    }
    if (Array.isArray(node)) return node[position(key, node.length)];
    ownProperty(node, key);
    return (node as Record<string, unknown>)[key];
  }

  #entriesOf(container: Container): unknown[] | Array<[unknown, unknown]> {
    let entries = this.#entries.get(container);
    if (entries === undefined) {
      entries = [...container];
      this.#entries.set(container, entries);
    }
    return entries;
  }

  #node(path: string[]): PathNode {
    let node = this.#root;
    for (const segment of path) {
      let child = node.children.get(segment);
      if (child === undefined) {
        child = newNode();
        node.children.set(segment, child);
      }
      node = child;
    }
    return node;
  }
}

/** Segments a step into `node` takes: a Map's are a row and a side (0 key, 1 value). */
function stepWidth(node: unknown): number {
  return node instanceof Map ? 2 : 1;
}

function position(segment: string, size: number): number {
  const index = /^(0|[1-9]\d{0,8})$/.test(segment) ? Number(segment) : -1;
  if (index < 0 || index >= size) throw new Error(`index ${segment} out of bounds`);
  return index;
}

function side(segment: string | undefined): 0 | 1 {
  if (segment === "0") return 0;
  if (segment === "1") return 1;
  throw new Error(`invalid Map entry side ${String(segment)}`);
}

function ownProperty(node: unknown, key: string): void {
  const prototype = typeof node === "object" && node !== null ? Object.getPrototypeOf(node) : undefined;
  if ((prototype !== Object.prototype && prototype !== null) || !Object.hasOwn(node as object, key)) {
    throw new Error(`invalid path: no property ${JSON.stringify(key)}`);
  }
}

/** superjson's path syntax: segments joined by `.`, with `\.` and `\\` escapes (only `\.` in legacy paths). */
function parsePath(path: string, legacyPaths: boolean): string[] {
  const segments = splitPath(path, legacyPaths);
  for (const segment of segments) {
    if (segment === "__proto__" || segment === "prototype" || segment === "constructor") {
      throw new Error(`${segment} is not allowed as a property`);
    }
  }
  return segments;
}

function splitPath(path: string, legacyPaths: boolean): string[] {
  const segments: string[] = [];
  let segment = "";
  for (let index = 0; index < path.length; index++) {
    const char = path.charAt(index);
    if (char === "\\") {
      const escaped = path.charAt(index + 1);
      if (!legacyPaths && escaped === "\\") {
        segment += "\\";
        index++;
        continue;
      }
      if (escaped === ".") {
        segment += ".";
        index++;
        continue;
      }
      if (!legacyPaths) throw new Error("invalid path");
    }
    if (char === ".") {
      segments.push(segment);
      segment = "";
      continue;
    }
    segment += char;
  }
  segments.push(segment);
  return segments;
}
