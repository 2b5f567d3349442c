import { expect } from "vitest";
import type { Execution, PendingRun } from "../../engine/types.ts";

/** The pending run of an execution that paused (no error, `ok` false); fails the test otherwise. */
export function pendingOf(execution: Execution): PendingRun {
  expect(execution.error, JSON.stringify(execution.error)).toBeUndefined();
  expect(execution.ok).toBe(false);
  expect(execution.pending, "the run should have paused").toBeDefined();
  return execution.pending!;
}

/** The return value of an execution that ended well (not paused); fails the test otherwise. */
export function okOf(execution: Execution): unknown {
  expect(execution.error, JSON.stringify(execution.error)).toBeUndefined();
  expect(execution.pending).toBeUndefined();
  expect(execution.ok).toBe(true);
  return execution.returns;
}
