import { MossError } from "../../engine/errors.ts";

/** Awaits a promise that must reject with a MossError and returns that error (other errors are rethrown). */
export async function rejection(promise: Promise<unknown>): Promise<MossError> {
  try {
    await promise;
  } catch (error) {
    if (MossError.is(error)) return error;
    throw error;
  }
  throw new Error("expected a MossError");
}
