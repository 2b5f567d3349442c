import { expect } from "vitest";
import type { Execution } from "../../engine/types.ts";

/** Asserts an execution succeeded, showing its error when it did not. */
export function expectOk(execution: Execution): void {
  expect(execution.error, JSON.stringify(execution.error)).toBeUndefined();
  expect(execution.ok).toBe(true);
}
