/** A hidden region in 1-based line numbers, markers included: lines `start..end` never reach the prompt. */
export interface HiddenRegion {
  start: number;
  end: number;
}

const OPEN_MARKER = "// <moss-hide>";
const CLOSE_MARKER = "// </moss-hide>";

/**
 * Finds the hidden regions of a module: a line whose trimmed text starts with `// <moss-hide>` opens one,
 * `// </moss-hide>` closes it; regions nest, an unclosed one hides to the end of file, a stray close is ignored
 * (its line is still dropped, since marker lines never appear in the prompt).
 */
export function findHiddenRegions(source: string): { regions: HiddenRegion[]; markerLines: Set<number> } {
  const lines = source.split("\n");
  const regions: HiddenRegion[] = [];
  const markerLines = new Set<number>();
  let depth = 0;
  let start = 0;
  lines.forEach((text, index) => {
    const line = index + 1;
    const trimmed = text.trim();
    if (trimmed.startsWith(OPEN_MARKER)) {
      markerLines.add(line);
      if (depth === 0) start = line;
      depth++;
    } else if (trimmed.startsWith(CLOSE_MARKER)) {
      markerLines.add(line);
      if (depth === 0) return;
      depth--;
      if (depth === 0) regions.push({ start, end: line });
    }
  });
  if (depth > 0) regions.push({ start, end: lines.length });
  return { regions, markerLines };
}

/** Tells whether a 1-based line is hidden (inside a region or a marker line). */
export function isLineHidden(
  line: number,
  regions: readonly HiddenRegion[],
  markerLines: ReadonlySet<number>,
): boolean {
  return markerLines.has(line) || regions.some((region) => line >= region.start && line <= region.end);
}

/** The visible source: every hidden line and marker line removed, the rest verbatim. */
export function visibleSource(source: string): string {
  const { regions, markerLines } = findHiddenRegions(source);
  return source
    .split("\n")
    .filter((_, index) => !isLineHidden(index + 1, regions, markerLines))
    .join("\n");
}

/** The source with hidden lines blanked (line count kept), for checkers that must map positions back. */
export function blankHiddenSource(source: string): string {
  const { regions, markerLines } = findHiddenRegions(source);
  return source
    .split("\n")
    .map((text, index) => (isLineHidden(index + 1, regions, markerLines) ? "" : text))
    .join("\n");
}
