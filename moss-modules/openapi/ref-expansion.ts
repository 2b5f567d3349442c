import { resolvePointer } from "./api-model.ts";

/**
 * Most nodes a document may hold as written, each node counted once however many `$ref`s reach it (a graph): what
 * validation walks (the schema check reads the document as written, the `$ref` check resolves each target once).
 * GitHub's REST document has about 260,000.
 */
export const MAX_DOCUMENT_NODES = 1_000_000;

/**
 * Most nodes a document may expand to once its `$ref`s are followed as a tree. Nothing in moss-ts expands a whole
 * document (validation reads it as a graph, declarations name shared schemas), so this bound is far above any real
 * document (GitHub's REST document expands to about 2 million): it refuses only `$ref`s layered to grow
 * exponentially (a chain where each schema refers twice to the one before), which any tool that follows `$ref`s
 * would expand without end.
 */
export const MAX_EXPANDED_NODES = 100_000_000;

/** The number of distinct nodes of `document` (objects counted once however often they are reached), capped. */
export function countDocumentNodes(document: unknown, limit = MAX_DOCUMENT_NODES): number {
  const seen = new Set<object>();
  const pending: unknown[] = [document];
  let nodes = 0;
  while (pending.length > 0 && nodes <= limit) {
    const node = pending.pop();
    nodes++;
    if (typeof node !== "object" || node === null || seen.has(node)) continue;
    seen.add(node);
    for (const child of Array.isArray(node) ? node : Object.values(node)) pending.push(child);
  }
  return nodes;
}

/** How large a document grows when its local `$ref`s are expanded, and the `$ref` that grows it most. */
export interface RefExpansion {
  /** Expanded node count, capped just above `limit`. */
  nodes: number;
  /** The `$ref` target with the largest expansion, when the count passed the limit. */
  largestRef?: string;
  /** Nodes that `$ref` expands to (capped). */
  largestRefNodes?: number;
}

/**
 * Counts the nodes of `document` with every local `$ref` expanded, in time linear in the document's size (each
 * target is counted once and its count reused; a `$ref` cycle counts as one node). Layered `$ref`s that expand
 * exponentially are found before anything expands them.
 */
export function measureRefExpansion(document: unknown, limit = MAX_EXPANDED_NODES): RefExpansion {
  const cap = limit + 1;
  const byRef = new Map<string, number>();
  const byObject = new WeakMap<object, number>();
  const visiting = new Set<unknown>();
  const count = (node: unknown): number => {
    if (typeof node !== "object" || node === null) return 1;
    const known = byObject.get(node);
    if (known !== undefined) return known;
    if (visiting.has(node)) return 1;
    visiting.add(node);
    let total = 1;
    const ref = (node as { $ref?: unknown }).$ref;
    if (typeof ref === "string" && ref.startsWith("#")) {
      let size = byRef.get(ref);
      if (size === undefined) {
        if (visiting.has(ref)) size = 1;
        else {
          visiting.add(ref);
          size = count(resolvePointer(document, ref));
          visiting.delete(ref);
          byRef.set(ref, size);
        }
      }
      total = Math.min(cap, total + size);
    }
    // No early stop: every `$ref` gets its count (memoized, so still linear), and the largest can be named.
    for (const child of Array.isArray(node) ? node : Object.values(node))
      total = Math.min(cap, total + count(child));
    visiting.delete(node);
    byObject.set(node, total);
    return total;
  };
  const nodes = count(document);
  if (nodes <= limit) return { nodes };
  let largestRef: string | undefined;
  let largestRefNodes = 0;
  for (const [ref, size] of byRef) {
    if (size >= largestRefNodes) {
      largestRef = ref;
      largestRefNodes = size;
    }
  }
  return { nodes, ...(largestRef ? { largestRef, largestRefNodes } : {}) };
}
