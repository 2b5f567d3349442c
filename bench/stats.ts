// Small helpers shared by the benchmarks: sampling, medians/p90, and fixed-width tables.

/** Median and 90th percentile of a set of samples. */
export interface Summary {
  median: number;
  p90: number;
  samples: number;
}

/** The value at `fraction` (0..1) of the sorted samples, nearest rank. */
export function percentile(values: number[], fraction: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[rank]!;
}

/** Median (mean of the two middle values for an even count) and p90 of the samples. */
export function summarize(values: number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const median =
    sorted.length === 0
      ? Number.NaN
      : sorted.length % 2
        ? sorted[middle]!
        : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return { median, p90: percentile(sorted, 0.9), samples: sorted.length };
}

/** Runs `action` `warmup` times unmeasured, then `runs` times, and summarizes the durations in ms. */
export async function sample(
  runs: number,
  action: (run: number) => unknown,
  warmup = Math.min(5, runs),
): Promise<Summary> {
  for (let run = 0; run < warmup; run++) await action(-1 - run);
  const durations: number[] = [];
  for (let run = 0; run < runs; run++) {
    const started = performance.now();
    await action(run);
    durations.push(performance.now() - started);
  }
  return summarize(durations);
}

/** Milliseconds with a sensible number of digits (µs below 1 ms). */
export function formatMs(milliseconds: number): string {
  if (!Number.isFinite(milliseconds)) return "n/a";
  if (milliseconds < 1) return `${(milliseconds * 1000).toFixed(1)} µs`;
  if (milliseconds < 100) return `${milliseconds.toFixed(2)} ms`;
  return `${milliseconds.toFixed(0)} ms`;
}

/** Bytes as MiB (or KiB when small). */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return "n/a";
  if (Math.abs(bytes) < 1024 * 1024) return `${(bytes / 1024).toFixed(0)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** A ratio such as `3.2×`, or `n/a` when either side is missing. */
export function formatRatio(value: number, baseline: number): string {
  if (!Number.isFinite(value) || !Number.isFinite(baseline) || baseline <= 0 || value < 0) return "n/a";
  const ratio = value / baseline;
  return `${ratio >= 10 ? ratio.toFixed(0) : ratio.toFixed(2)}×`;
}

/** Whether a measured figure meets its target, as a short word for the tables. */
export function verdict(value: number, target: number): string {
  if (!Number.isFinite(value)) return "n/a";
  return value <= target ? "met" : "MISSED";
}

/** Prints a titled table with right-aligned columns except the first. */
export function printTable(title: string, header: string[], rows: string[][], notes: string[] = []): void {
  const widths = header.map((cell, column) =>
    Math.max(cell.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)))
      .join("  ");
  console.log(`\n## ${title}`);
  console.log(line(header));
  console.log(widths.map((width) => "-".repeat(width)).join("  "));
  for (const row of rows) console.log(line(row));
  for (const note of notes) console.log(`  ${note}`);
}
