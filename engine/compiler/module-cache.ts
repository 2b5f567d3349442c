import { createHash } from "node:crypto";
import type { CompiledModule } from "../module/index.ts";

/** Options of {@link ModuleCache}. */
export interface ModuleCacheOptions {
  /** Distinct module sources kept (least recently used dropped first). Default 32. */
  maxModules?: number;
}

/**
 * Context modules read, analysed, type-checked and loaded once, shared by every runtime compiled from the same
 * source: give one cache to the compilers of many sessions (as `moss serve` does) and each new session costs its
 * hooks and bindings only, not a ts-morph analysis, a module type-check and a module load.
 *
 * What the sessions of one cached module share: the module's analysis and program, its loaded instance (so its
 * top-level variables are one per process, like any imported module's) and its reflected prompt. What each session
 * keeps its own: its compiler and container (the services `__moss_compile__` and the host setup bind — shared only
 * when they bind a value or a singleton from a container they share), its data fields and context, its locals,
 * policies, conversation and run log. A context whose `code` overrides the module is another source: another entry.
 * A compile that fails is not kept, so a fixed file compiles again.
 */
export class ModuleCache {
  readonly #maxModules: number;
  readonly #modules = new Map<string, Promise<CompiledModule>>();

  constructor(options: ModuleCacheOptions = {}) {
    this.#maxModules = Math.max(1, options.maxModules ?? 32);
  }

  /** Modules held now. */
  get size(): number {
    return this.#modules.size;
  }

  /**
   * The module compiled from exactly this source (and display path), building it with `build` the first time; a
   * concurrent second caller waits for the first build instead of starting another.
   */
  compiled(
    key: { path: string; displayPath: string; source: string; sourceOverridden: boolean },
    build: () => Promise<CompiledModule>,
  ): Promise<CompiledModule> {
    const name = [
      key.path,
      key.displayPath,
      key.sourceOverridden ? "override" : "file",
      createHash("sha256").update(key.source).digest("base64url"),
    ].join("\n");
    let entry = this.#modules.get(name);
    if (entry !== undefined) {
      // Most recently used last: Map keeps insertion order.
      this.#modules.delete(name);
      this.#modules.set(name, entry);
      return entry;
    }
    entry = build();
    this.#modules.set(name, entry);
    entry.catch(() => {
      if (this.#modules.get(name) === entry) this.#modules.delete(name);
    });
    while (this.#modules.size > this.#maxModules) {
      const oldest = this.#modules.keys().next().value as string;
      this.#modules.delete(oldest);
    }
    return entry;
  }
}
