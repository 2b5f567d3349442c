import type { MossRuntime } from "./runtime/moss-runtime.ts";

/**
 * Base class of a context module's `Moss`. Fields whose type is a class, abstract class or interface
 * are services injected from the container; every other field is data that persists between turns.
 */
export class Moss {
  /** Prints values to the execution's stdout, pretty-formatted. Available inside the sandbox. */
  declare pprint: (...values: unknown[]) => void;
}

/** A service that wants to know when it is injected into a runtime and when that runtime closes. */
export interface Injection {
  onInject?(runtime: MossRuntime, fieldName: string): void | Promise<void>;
  onDestroy?(): void | Promise<void>;
}
