const destroyed = new WeakSet<object>();

/** Whether a value has an `onDestroy()` method that `destroyOnce` would call. */
export function hasOnDestroy(value: unknown): value is { onDestroy(): unknown } {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { onDestroy?: unknown }).onDestroy === "function"
  );
}

/**
 * Calls `value.onDestroy()` unless it was already called through this function in this process,
 * so a service shared by several containers or runtimes is destroyed exactly once. Returns whether it ran.
 */
export async function destroyOnce(value: unknown): Promise<boolean> {
  if (!hasOnDestroy(value) || destroyed.has(value)) return false;
  destroyed.add(value);
  await value.onDestroy();
  return true;
}
