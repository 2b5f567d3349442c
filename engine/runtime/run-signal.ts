/**
 * A run's signal, made only when host code reads it: most runs' calls never do, and making and aborting an
 * AbortController (its error included) cost ~25 µs of every execute. Read after `end`, it is already aborted.
 */
export class RunSignal {
  #controller: AbortController | undefined;
  #ended = false;

  /** The signal; it aborts when the run ends. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#ended) this.#controller.abort(new Error("the run ended"));
    }
    return this.#controller.signal;
  }

  /** Whether the run has ended. */
  get ended(): boolean {
    return this.#ended;
  }

  /** The run ended: host work that reads this signal stops. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#controller?.abort(new Error("the run ended"));
  }
}

let current: AbortSignal | RunSignal | undefined;

/**
 * The signal of the run whose code is calling into the host right now: it aborts when that run ends (completion,
 * error, timeout, pause), so host work nobody awaits any more stops with it. Read it synchronously, at the start of
 * the host method (before its first `await`); undefined outside a run's call.
 */
export function currentRunSignal(): AbortSignal | undefined {
  return current instanceof RunSignal ? current.signal : current;
}

/**
 * Runs `work` (the synchronous start of one host call of a run) with `currentRunSignal()` set to `signal`. A plain
 * variable, not AsyncLocalStorage: on Node 20 async hooks enabled inside isolated-vm's callbacks crash the process.
 */
export function withRunSignal<T>(signal: AbortSignal | RunSignal | undefined, work: () => T): T {
  const previous = current;
  current = signal;
  try {
    return work();
  } finally {
    current = previous;
  }
}
