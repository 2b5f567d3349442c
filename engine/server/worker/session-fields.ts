// The `session` event of a run: after each execution, the data fields of `moss` as a tenant reads them (readable JSON,
// redacted, bounded per field) and the names of those that changed since the last time the thread showed them.
import type { AgentEvent } from "../../agent/index.ts";
import { decodeProperties, partitionProperties } from "../../context/index.ts";
import { truncateMiddle } from "../../format-value.ts";
import type { SessionEvent } from "../protocol.ts";
import type { TenantView } from "../tenant-view.ts";

/** The most characters of one field's text in a `session` event (the middle of a longer one is cut, with a marker). */
export const SESSION_FIELD_MAX_CHARS = 4_096;

/**
 * The data fields of a context's `properties` as a tenant reads them: each decoded by the context's typed encoding,
 * written as indented JSON (a Date as its ISO text, a Map as an object or its entries, a Set as an array, a bigint as
 * `"12n"`), redacted by the server's one redactor, then cut to `maxChars`. `dataFields` names the module's declared
 * fields (properties kept for fields no longer declared are left out); undefined shows every property.
 */
export function sessionFields(
  properties: Record<string, unknown>,
  dataFields: readonly string[] | undefined,
  view: TenantView,
  maxChars = SESSION_FIELD_MAX_CHARS,
): Record<string, string> {
  const shown = dataFields === undefined ? properties : partitionProperties(properties, dataFields).declared;
  const fields: Record<string, string> = {};
  for (const [name, encoded] of Object.entries(shown)) {
    let text: string;
    try {
      text = readableJson(decodeProperties({ [name]: encoded })[name]);
    } catch (error) {
      text = `[cannot be shown: ${(error as Error)?.message ?? String(error)}]`;
    }
    // Redacted before it is cut: a secret the cut would split is removed whole.
    fields[view.text(name)] = truncateMiddle(view.text(text), maxChars);
  }
  return fields;
}

/** A decoded value as indented JSON text, with the types JSON lacks written readably. */
function readableJson(value: unknown): string {
  if (value === undefined) return "undefined";
  return (
    JSON.stringify(
      value,
      (_key, inner: unknown) => {
        if (typeof inner === "bigint") return `${inner}n`;
        if (inner instanceof Map) {
          const entries = [...inner.entries()];
          return entries.every(([key]) => typeof key === "string") ? Object.fromEntries(entries) : entries;
        }
        if (inner instanceof Set) return [...inner];
        return inner;
      },
      2,
    ) ?? String(value)
  );
}

/**
 * Follows one run's agent events and makes its `session` events: the fields after each execution, and what changed
 * since the last fields the thread showed (its last stored `session` event, else the data as the run's task found
 * them, else nothing: every field is new).
 */
export class RunSession {
  readonly #view: TenantView;
  #previous: Record<string, string> | undefined;
  #dataFields: readonly string[] | undefined;

  constructor(view: TenantView, previous: Record<string, string> | undefined) {
    this.#view = view;
    this.#previous = previous;
  }

  /** The module's declared data fields, once the run's runtime knows them. */
  set dataFields(fields: readonly string[]) {
    this.#dataFields = fields;
  }

  /** The `session` event that follows `event` (an execution), or undefined. */
  after(event: AgentEvent): SessionEvent | undefined {
    if (event.type === "message") {
      const metadata = event.message.metadata as { kind?: unknown; context?: { properties?: unknown } };
      const properties = metadata?.context?.properties;
      if (this.#previous === undefined && metadata?.kind === "task" && isRecord(properties)) {
        this.#previous = sessionFields(properties, this.#dataFields, this.#view);
      }
      return undefined;
    }
    if (event.type !== "execution" || !isRecord(event.execution.context?.properties)) return undefined;
    const fields = sessionFields(event.execution.context.properties, this.#dataFields, this.#view);
    const previous = this.#previous ?? {};
    const changed = [...new Set([...Object.keys(previous), ...Object.keys(fields)])].filter(
      (name) => previous[name] !== fields[name],
    );
    this.#previous = fields;
    return { type: "session", step: event.step, fields, changed };
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
