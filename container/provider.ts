import type { Container } from "./container.ts";
import type { Token } from "./token.ts";

/** A recipe for a service: the contract it fulfils and a factory that builds it from the container. */
export interface Provider<T = unknown> {
  contract: Token<T>;
  /** One instance per container (default) or a new one on every fetch. */
  singleton?: boolean;
  /** Builds the service; receives the container the provider was registered in. */
  factory(container: Container): T | Promise<T>;
}

/** Builds a `Provider`: `provide(Ball, (container) => new SimulatedBall(), { singleton: true })`. */
export function provide<T>(
  contract: Token<T>,
  factory: (container: Container) => T | Promise<T>,
  options: { singleton?: boolean } = {},
): Provider<T> {
  return { contract, singleton: options.singleton ?? true, factory };
}
