import { MossError } from "../errors.ts";
import type { MossContext } from "../types.ts";
import { encodedValueProblem } from "./encode-properties.ts";
import { CONTEXT_VERSION } from "./wire-properties.ts";

/**
 * Checks that a parsed JSON value is a MossContext and returns it (a shallow copy, fields outside the protocol kept).
 * Throws MossError `context-invalid` listing every problem, naming `source` (a file) when given.
 */
export function validateContext(json: unknown, source?: string): MossContext {
  const where = source === undefined ? "" : ` in ${source}`;
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    const found = json === null ? "null" : Array.isArray(json) ? "an array" : typeof json;
    throw new MossError(
      "context-invalid",
      `Invalid MossContext${where}: expected a JSON object, found ${found}`,
      {
        source,
        problems: ["not an object"],
      },
    );
  }
  const context = json as Record<string, unknown>;
  const problems: string[] = [];
  const version = context.version === 1 || context.version === CONTEXT_VERSION ? context.version : undefined;
  if (version === undefined) {
    problems.push(
      context.version === undefined
        ? `version is missing (expected 1 or ${CONTEXT_VERSION})`
        : `unknown version ${JSON.stringify(context.version)} (expected 1 or ${CONTEXT_VERSION}; a newer moss-ts may have written it)`,
    );
  }
  if (context.id !== undefined && (typeof context.id !== "string" || context.id === ""))
    problems.push("id must be a non-empty string when present");
  if (typeof context.module !== "string" || context.module === "")
    problems.push("module must be a non-empty string");
  if (context.code !== undefined && typeof context.code !== "string")
    problems.push("code must be a string when present");
  if (context.executeCode !== undefined && typeof context.executeCode !== "string") {
    problems.push("executeCode must be a string when present");
  }
  // Documents written before `executed` existed load as "not executed".
  if (context.executed !== undefined && typeof context.executed !== "boolean") {
    problems.push("executed must be a boolean");
  }
  if (context.definitions !== undefined && typeof context.definitions !== "string")
    problems.push("definitions must be a string when present");
  const properties = context.properties;
  if (typeof properties !== "object" || properties === null || Array.isArray(properties)) {
    problems.push("properties must be an object");
  } else {
    for (const [key, encoded] of Object.entries(properties)) {
      const problem = encodedValueProblem(encoded, version ?? CONTEXT_VERSION);
      if (problem !== undefined) problems.push(`properties[${JSON.stringify(key)}] ${problem}`);
    }
  }
  if (problems.length > 0) {
    throw new MossError("context-invalid", `Invalid MossContext${where}: ${problems.join("; ")}`, {
      source,
      problems,
    });
  }
  return {
    ...context,
    properties: { ...(properties as Record<string, unknown>) },
    executed: context.executed ?? false,
  } as MossContext;
}
