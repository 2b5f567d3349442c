import type { AgentEvent } from "./moss-agent.ts";

/**
 * A run as an async iterable of its events: `start` begins the run with the listener to call for each event; the
 * iteration ends after the run settles (its last event is `run-end`) and rethrows the run's failure.
 */
export function eventStream(
  start: (onEvent: (event: AgentEvent) => void) => Promise<unknown>,
): AsyncIterable<AgentEvent> {
  const queue: AgentEvent[] = [];
  let wake: (() => void) | undefined;
  let finished = false;
  let failure: unknown;
  const done = start((event) => {
    queue.push(event);
    wake?.();
  }).then(
    () => {
      finished = true;
      wake?.();
    },
    (error: unknown) => {
      failure = error ?? new Error("run failed");
      finished = true;
      wake?.();
    },
  );
  return {
    async *[Symbol.asyncIterator]() {
      while (true) {
        const event = queue.shift();
        if (event !== undefined) {
          yield event;
          continue;
        }
        if (finished) break;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
      }
      await done;
      if (failure !== undefined) throw failure;
    },
  };
}
