let current: AbortSignal | undefined;

/**
 * The signal of the run whose code is calling into the host right now: it aborts when that run ends (completion,
 * error, timeout, pause), so host work nobody awaits any more stops with it. Read it synchronously, at the start of
 * the host method (before its first `await`); undefined outside a run's call.
 */
export function currentRunSignal(): AbortSignal | undefined {
  return current;
}

/**
 * Runs `work` (the synchronous start of one host call of a run) with `currentRunSignal()` set to `signal`. A plain
 * variable, not AsyncLocalStorage: on Node 20 async hooks enabled inside isolated-vm's callbacks crash the process.
 */
export function withRunSignal<T>(signal: AbortSignal | undefined, work: () => T): T {
  const previous = current;
  current = signal;
  try {
    return work();
  } finally {
    current = previous;
  }
}
