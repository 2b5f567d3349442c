import type { MossContext } from "./types.ts";

/**
 * Base class of a context module's `Moss`. Fields whose type is a class, abstract class or interface
 * are services injected from the container; every other field is data that persists between turns.
 */
export class Moss {
  /** Prints values to the execution's stdout, pretty-formatted. Available inside the sandbox. */
  declare pprint: (...values: unknown[]) => void;
  /**
   * Asks the user a question and waits for the answer: the run pauses until a person answers (with `choices`, one
   * of them). Available inside the sandbox.
   */
  declare ask: (question: string, options?: { choices?: string[] }) => Promise<string>;
  /**
   * Shows an image to you (the model) with this run's outcome, e.g. one a service returned:
   * `moss.show({ mediaType: "image/png", data: bytes })`. Available inside the sandbox.
   */
  declare show: (image: {
    mediaType: "image/png" | "image/jpeg" | "image/gif" | "image/webp";
    /** The image's bytes (or base64 text). */
    data: Uint8Array | string;
    detail?: "low" | "high" | "auto";
    name?: string;
  }) => void;
}

/** What an injected service sees of the runtime it is injected into. */
export interface InjectionRuntime {
  /** The context module the runtime runs. */
  readonly modulePath: string;
  /** The runtime's current MossContext. */
  dumpContext(): MossContext;
  /** The service fields of `moss` and their values. */
  mossInjections(): Record<string, unknown>;
}

/** A service that wants to know when it is injected into a runtime and when that runtime closes. */
export interface Injection {
  onInject?(runtime: InjectionRuntime, fieldName: string): void | Promise<void>;
  onDestroy?(): void | Promise<void>;
}
