import { Container as InversifyContainer } from "inversify";
import { MossError } from "../engine/errors.ts";
import { destroyOnce, hasOnDestroy } from "./destroy-once.ts";
import type { Provider } from "./provider.ts";
import { type Token, tokenName } from "./token.ts";

/** Options of `new Container()`. */
export interface ContainerOptions {
  /** The container this one falls back to for tokens it does not bind itself. */
  parent?: Container;
  /** Shown in error messages; default `root`, or `<parent>/child-<n>` for a child. */
  name?: string;
}

/** A setup step run once by `Container.bootstrap()`. */
export type Bootstrapper = (container: Container) => void | Promise<void>;

/**
 * The IoC container of moss-ts, in MOSS terms, over an inversify container.
 *
 * Ownership: the container owns every value bound with `bind` and every singleton its providers built;
 * `shutdown()` calls their `onDestroy()` once, newest first, after shutting down its children.
 * A value replaced by a later `bind`/`register` stays owned and is destroyed at shutdown, not at replacement
 * (replacement is synchronous, `onDestroy` may be async). Values of transient providers belong to the caller.
 */
export class Container {
  /** Shown in error messages. */
  readonly name: string;
  /** The container this one falls back to, if any. */
  readonly parent: Container | undefined;
  readonly #inner: InversifyContainer;
  readonly #children = new Set<Container>();
  readonly #owned: object[] = [];
  readonly #providers = new Map<Token, Provider>();
  readonly #bootstrappers: Bootstrapper[] = [];
  #bootstrappersRun = 0;
  #bootstrapping: Promise<unknown> = Promise.resolve();
  #childrenCreated = 0;
  #shutdown: Promise<void> | undefined;

  constructor(options: ContainerOptions = {}) {
    const parent = options.parent;
    if (parent !== undefined) parent.#assertOpen("create a child of");
    this.parent = parent;
    this.name =
      options.name ?? (parent === undefined ? "root" : `${parent.name}/child-${++parent.#childrenCreated}`);
    this.#inner = new InversifyContainer(parent === undefined ? {} : { parent: parent.#inner });
    if (parent !== undefined) parent.#children.add(this);
  }

  /** Binds a constant value to a token in this container, replacing this container's previous binding. */
  bind<T>(token: Token<T>, value: T): this {
    this.#assertOpen("bind in");
    this.#assertToken(token);
    this.#replace(token);
    this.#inner.bind<T>(token).toConstantValue(value);
    if (hasOnDestroy(value)) this.#owned.push(value);
    return this;
  }

  /** Registers a provider for its contract in this container, replacing this container's previous binding. */
  register<T>(provider: Provider<T>): this {
    this.#assertOpen("register in");
    if (typeof provider !== "object" || provider === null || typeof provider.factory !== "function") {
      throw new MossError(
        "invalid-argument",
        `A provider needs a contract and a factory function (container "${this.name}")`,
      );
    }
    this.#assertToken(provider.contract);
    const singleton = provider.singleton ?? true;
    this.#replace(provider.contract);
    const binding = this.#inner
      .bind<T>(provider.contract)
      .toDynamicValue(() => this.#build(provider, singleton));
    if (singleton) binding.inSingletonScope();
    else binding.inTransientScope();
    this.#providers.set(provider.contract, provider as Provider);
    return this;
  }

  /** Adds a step for `bootstrap()` to run, in the order added. */
  addBootstrapper(bootstrapper: Bootstrapper): this {
    this.#assertOpen("add a bootstrapper to");
    this.#bootstrappers.push(bootstrapper);
    return this;
  }

  /**
   * Makes the container ready: runs the bootstrappers not run yet, in order, then instantiates every singleton
   * provider of this container (async ones included), so factory failures surface now rather than at first use.
   * Calling it again runs only what was added since.
   */
  bootstrap(): Promise<this> {
    this.#assertOpen("bootstrap");
    const run = this.#bootstrapping.then(
      () => this.#bootstrapNow(),
      () => this.#bootstrapNow(),
    );
    this.#bootstrapping = run;
    return run.then(() => this);
  }

  /** The value bound to a token here or in a parent (nearest wins); `undefined` when unbound. */
  get<T>(token: Token<T>): T | undefined {
    this.#assertOpen("get from");
    try {
      return this.#inner.get<T>(token, { optional: true });
    } catch (error) {
      throw this.#translate(error, token);
    }
  }

  /** Like `get`, for providers whose factory is async (also works for sync ones). */
  async getAsync<T>(token: Token<T>): Promise<T | undefined> {
    this.#assertOpen("get from");
    return this.#inner.getAsync<T>(token, { optional: true });
  }

  /** The value bound to a token; throws MossError `binding-missing` naming the token and container when unbound. */
  forceFetch<T>(token: Token<T>): T {
    if (!this.bound(token)) throw this.#missing(token);
    return this.get(token) as T;
  }

  /** Like `forceFetch`, for providers whose factory is async. */
  async forceFetchAsync<T>(token: Token<T>): Promise<T> {
    if (!this.bound(token)) throw this.#missing(token);
    return (await this.getAsync(token)) as T;
  }

  /** Whether the token is bound here or in a parent. */
  bound(token: Token): boolean {
    this.#assertOpen("query");
    return this.#inner.isBound(token);
  }

  /** Creates a child container that sees this one's bindings; its own bindings shadow them. */
  child(name?: string): Container {
    return new Container(name === undefined ? { parent: this } : { parent: this, name });
  }

  /** Whether `shutdown()` has been called. */
  get closed(): boolean {
    return this.#shutdown !== undefined;
  }

  /**
   * Shuts down the children (newest first), then calls `onDestroy()` of every owned value (newest first),
   * each exactly once, and releases all bindings. Idempotent: later calls return the same promise.
   * Hook failures do not stop the others; they are reported together as MossError `hook-failed`.
   */
  shutdown(): Promise<void> {
    this.#shutdown ??= this.#shutdownNow();
    return this.#shutdown;
  }

  toString(): string {
    return `Container "${this.name}"`;
  }

  async #bootstrapNow(): Promise<void> {
    while (this.#bootstrappersRun < this.#bootstrappers.length) {
      const bootstrapper = this.#bootstrappers[this.#bootstrappersRun]!;
      await bootstrapper(this);
      this.#bootstrappersRun++;
    }
    for (const [token, provider] of this.#providers) {
      if (provider.singleton ?? true) await this.#inner.getAsync(token);
    }
  }

  async #shutdownNow(): Promise<void> {
    const failures: string[] = [];
    const errors: unknown[] = [];
    for (const child of [...this.#children].reverse()) {
      try {
        await child.shutdown();
      } catch (error) {
        errors.push(error);
        failures.push(error instanceof Error ? error.message : String(error));
      }
    }
    while (this.#owned.length > 0) {
      const value = this.#owned.pop()!;
      try {
        await destroyOnce(value);
      } catch (error) {
        errors.push(error);
        const name = (value as { constructor?: { name?: string } }).constructor?.name || "value";
        failures.push(
          `${name}.onDestroy() failed: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    }
    this.#providers.clear();
    if (this.parent !== undefined) this.parent.#children.delete(this);
    if (errors.length > 0) {
      throw new MossError(
        "hook-failed",
        `Shutting down container "${this.name}": ${failures.join("; ")}`,
        { container: this.name, errors },
        { cause: errors[0] },
      );
    }
  }

  #build<T>(provider: Provider<T>, singleton: boolean): T | Promise<T> {
    const value = provider.factory(this);
    if (!singleton) return value;
    if (!isPromiseLike(value)) return this.#own(value);
    return Promise.resolve(value).then(async (resolved) => {
      if (this.#shutdown === undefined) return this.#own(resolved);
      // Finished building after shutdown began: no owner is left, so destroy it and refuse it.
      await destroyOnce(resolved);
      throw new MossError(
        "container-closed",
        `${tokenName(provider.contract)} was built after container "${this.name}" shut down`,
        {
          container: this.name,
        },
      );
    });
  }

  #own<T>(value: T): T {
    if (hasOnDestroy(value)) this.#owned.push(value);
    return value;
  }

  #replace(token: Token): void {
    if (this.#inner.isCurrentBound(token)) this.#inner.unbind(token);
    this.#providers.delete(token);
  }

  #assertOpen(action: string): void {
    if (this.#shutdown !== undefined) {
      throw new MossError("container-closed", `Cannot ${action} container "${this.name}": it is shut down`, {
        container: this.name,
      });
    }
  }

  #assertToken(token: unknown): void {
    if (typeof token !== "function" && typeof token !== "string" && typeof token !== "symbol") {
      throw new MossError(
        "invalid-argument",
        `A token must be a class, a string or a symbol, got ${token === null ? "null" : typeof token} (container "${this.name}")`,
      );
    }
  }

  #missing(token: Token): MossError {
    const name = tokenName(token);
    const scope = this.parent === undefined ? "" : " or its parents";
    return new MossError("binding-missing", `No binding for ${name} in container "${this.name}"${scope}`, {
      token: name,
      container: this.name,
    });
  }

  #translate(error: unknown, token: Token): unknown {
    if (error instanceof Error && /Unexpected asynchronous/.test(error.message)) {
      return new MossError(
        "invalid-argument",
        `${tokenName(token)} in container "${this.name}" is built asynchronously: use getAsync() or forceFetchAsync()`,
        { token: tokenName(token), container: this.name },
        { cause: error },
      );
    }
    return error;
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}
