import { handleSkeleton } from "./handle-wire.ts";
import type { HandleMembrane } from "./host-membrane.ts";

/** What a handle denotes in a run: the first thing found for it, everything found for it, and how a person reads it. */
interface Denotation {
  denotes: string;
  all: Set<string>;
  description: string;
}

/**
 * What the handles of one run denote. A handle a call's result brought denotes `@<call>.<n>`, the n-th handle of
 * the result of call <call> (1-based, as the log counts). Handles the runtime installed denote their position
 * (`moss.silo`); any other handle denotes itself in this runtime only. A logged call matches a new one only when
 * each handle denotes the same thing in both: ids differ between runtimes, and pairing ids as they showed up let a
 * resumed run hand an approved call another host object than the one the person approved.
 */
export class Denotations {
  readonly #membrane: HandleMembrane;
  /** Identifies the runtime: a handle it knows nothing more of denotes `<origin>#<id>`. */
  readonly #origin: string;
  readonly #known = new Map<number, Denotation>();

  constructor(membrane: HandleMembrane, origin: string) {
    this.#membrane = membrane;
    this.#origin = origin;
  }

  /** What a handle denotes and how a person reads it. */
  denote(handle: number): Denotation {
    const known = this.#known.get(handle);
    if (known !== undefined) return known;
    const info = this.#membrane.info(handle);
    const type = info?.typeName;
    const denotes = info?.origin ?? `${this.#origin}#${handle}`;
    return {
      denotes,
      all: new Set([denotes]),
      description:
        info?.origin === undefined
          ? `${type ?? "a host object"} from before this run`
          : `${info.origin}${type === undefined ? "" : `: ${type}`}`,
    };
  }

  /** How a person (or a policy) reads a handle: what it denotes, and its declared type. */
  describe(handle: number): string {
    return this.denote(handle).description;
  }

  /** The arguments as data, each host object described by what it denotes. */
  argumentsAsData(args: string): unknown[] {
    return this.#membrane.argumentsAsData(args, (id) => `[${this.describe(id)}]`);
  }

  /** For each argument that is itself a host object, how a person reads it, by index; undefined when none is. */
  handlesOf(args: string): Record<number, string> | undefined {
    if (!args.includes('["H",')) return undefined;
    const marks = new Map<object, string>();
    const values = this.#membrane.argumentsAsData(args, (id) => {
      const mark = {};
      marks.set(mark, this.describe(id));
      return mark;
    });
    const handles: Record<number, string> = {};
    for (const [index, value] of values.entries()) {
      const described = typeof value === "object" && value !== null ? marks.get(value) : undefined;
      if (described !== undefined) handles[index] = described;
    }
    return Object.keys(handles).length === 0 ? undefined : handles;
  }

  /** Whether each handle given denotes what the logged one did (a handle several calls returned denotes each). */
  denotesAll(logged: readonly string[], given: readonly number[]): boolean {
    return logged.length === given.length && given.every((id, i) => this.denote(id).all.has(logged[i]!));
  }

  /** Learns what the handles a call's result brought denote: the n-th handle of call `index`'s result. */
  learn(index: number, key: string, wire: string): void {
    if (!wire.includes('["H",')) return;
    const ids = handleSkeleton(wire)?.ids ?? [];
    for (const [n, id] of ids.entries()) {
      const info = this.#membrane.info(id);
      if (info === undefined || info.origin !== undefined) continue;
      const denotes = `@${index + 1}.${n}`;
      const known = this.#known.get(id);
      if (known !== undefined) {
        known.all.add(denotes);
        continue;
      }
      this.#known.set(id, {
        denotes,
        all: new Set([denotes]),
        description: `${info.typeName ?? "a host object"}${ids.length > 1 ? ` #${n + 1}` : ""} returned by call ${index + 1} (${key})`,
      });
    }
  }
}
