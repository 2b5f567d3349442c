import { decodeWire, encodeWire } from "../membrane/index.ts";

/*
 * The host handles in a wire text (nodes `["H", shape]`), as the run log compares and counts them: a replayed call
 * must be given, and answer with, the same data and as many handles, whatever their ids in this runtime.
 */

/** Whether a wire text holds a host handle (a node `["H", shape]`). */
export function holdsHandles(wire: string): boolean {
  if (!wire.includes('["H",')) return false;
  try {
    return (JSON.parse(wire) as unknown[]).some((node) => Array.isArray(node) && node[0] === "H");
  } catch {
    return true;
  }
}

/** Whether two wire texts hold the same data, handles compared by kind only (what they denote is compared apart). */
export function sameData(a: string, b: string): boolean {
  if (a === b) return true;
  if (!a.includes('["H",') || !b.includes('["H",')) return false;
  const left = handleSkeleton(a);
  const right = handleSkeleton(b);
  return left !== undefined && right !== undefined && left.text === right.text;
}

/** A wire's data with its handles left out (by kind), and the handle ids in the order they appear. */
export function handleSkeleton(wire: string): { text: string; ids: number[] } | undefined {
  const ids: number[] = [];
  try {
    const text = encodeWire(
      decodeWire(wire, {
        onHandle: (shape) => {
          ids.push(Number(shape.id));
          return `[handle ${shape.kind}]`;
        },
      }),
    );
    return { text, ids };
  } catch {
    return undefined;
  }
}
