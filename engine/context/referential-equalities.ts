/**
 * Restores superjson's `meta.referentialEqualities` on a value superjson decoded without them. Two faults of
 * superjson's own pass are avoided; the document format is the same.
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
 */
export function applyReferentialEqualities(value: unknown, annotations: unknown, version: unknown): unknown {
  // As in superjson: a document without `v` has legacy paths, where `\\` is no escape.
  const state = new PathState(value, (version as number) < 1);
  const equalities: Array<[string[], string[]]> = [];
  const addGroups = (groups: unknown) => {
    if (typeof groups !== "object" || groups === null || Array.isArray(groups)) {
      throw new Error("malformed referential equalities");
    }
    for (const [source, targets] of Object.entries(groups)) {
      const sourcePath = state.parse(source);
      for (const target of stringList(targets)) equalities.push([sourcePath, state.parse(target)]);
    }
  };
  if (Array.isArray(annotations)) {
    const [rootPaths, others] = annotations as unknown[];
    for (const target of stringList(rootPaths)) equalities.push([[], state.parse(target)]);
    if (others !== undefined) addGroups(others);
  } else {
    addGroups(annotations);
  }
  for (const [source, target] of equalities) state.declare(source, target);
  for (const [source, target] of equalities) state.set(target, state.get(source));
  state.rebuild();
  return value;
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
  readonly #legacyPaths: boolean;
  readonly #entries = new Map<Container, unknown[] | Array<[unknown, unknown]>>();
  readonly #written = new Set<Container>();

  constructor(value: unknown, legacyPaths: boolean) {
    this.#root = { ...newNode(), resolved: true, value };
    this.#legacyPaths = legacyPaths;
  }

  parse(path: string): string[] {
    const segments = parsePath(path, this.#legacyPaths);
    for (const segment of segments) {
      if (segment === "__proto__" || segment === "prototype" || segment === "constructor") {
        throw new Error(`${segment} is not allowed as a property`);
      }
    }
    return segments;
  }

  /** Records that `target` holds the object at `source`. */
  declare(source: string[], target: string[]): void {
    this.#node(source);
    const node = this.#node(target);
    if (node.source !== undefined)
      throw new Error(`path ${target.join(".")} is the target of two equalities`);
    node.source = source;
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
