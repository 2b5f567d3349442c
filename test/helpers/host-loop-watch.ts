import { PerformanceObserver } from "node:perf_hooks";
import { setImmediate as nextTurn } from "node:timers/promises";

/** Options of `watchHostLoop`. */
export interface HostLoopWatchOptions {
  /**
   * Leave this thread's own garbage-collection pauses out of the stalls. Only for work that runs on another thread
   * (the type-check worker): there a major GC of the host's heap, which a loaded machine can stretch past half a
   * second, says nothing of where the work ran. Work on the host (decoding a hostile value) keeps them counted,
   * because its allocations are the cause.
   */
  excludeGcPauses?: boolean;
}

const TICK_MS = 10;

/** Runs `action` while a 10 ms ticker measures the longest stall of the host's event loop beyond one tick. */
export async function watchHostLoop<T>(
  action: () => Promise<T>,
  options: HostLoopWatchOptions = {},
): Promise<{ value: T; maxBlockMs: number }> {
  const ticks = [performance.now()];
  const ticker = setInterval(() => ticks.push(performance.now()), TICK_MS);
  const pauses: Array<{ start: number; end: number }> = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries())
      pauses.push({ start: entry.startTime, end: entry.startTime + entry.duration });
  });
  if (options.excludeGcPauses) observer.observe({ entryTypes: ["gc"] });
  try {
    const value = await action();
    ticks.push(performance.now());
    clearInterval(ticker);
    if (options.excludeGcPauses) {
      // GC entries reach the observer a turn after the pause.
      await nextTurn();
      await nextTurn();
    }
    let maxBlockMs = 0;
    for (let index = 1; index < ticks.length; index++) {
      const from = ticks[index - 1] as number;
      const to = ticks[index] as number;
      const paused = pauses.reduce(
        (sum, pause) => sum + Math.max(0, Math.min(to, pause.end) - Math.max(from, pause.start)),
        0,
      );
      maxBlockMs = Math.max(maxBlockMs, to - from - TICK_MS - paused);
    }
    return { value, maxBlockMs };
  } finally {
    clearInterval(ticker);
    observer.disconnect();
  }
}
