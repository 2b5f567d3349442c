import type { ApiModel } from "./api-model.ts";
import type { OperationMatch } from "./declaration.ts";

const DEFAULT_LIMIT = 10;
const MAX_LIMIT = 50;

/**
 * The `search(query, limit)` of a large API's service: operations ranked by how many words of the query their
 * name (3 points a word), summary (2) or tag, path and operationId (1) contain; those matching every word first.
 */
export function operationSearch(
  model: ApiModel,
  signatures: ReadonlyMap<string, string>,
): (query: unknown, limit?: unknown) => OperationMatch[] {
  const entries = model.operations.map((operation) => ({
    operation,
    name: splitWords(operation.name).join(" "),
    summary: (operation.summary ?? operation.description ?? "").toLowerCase(),
    rest: [operation.tags.join(" "), operation.path, operation.method, operation.operationId ?? ""]
      .join(" ")
      .toLowerCase(),
  }));
  return (query, limit) => {
    if (typeof query !== "string") throw new TypeError("search(query): query must be a string");
    const count =
      limit === undefined ? DEFAULT_LIMIT : Math.min(MAX_LIMIT, Math.max(1, Math.floor(Number(limit)) || 1));
    const words = splitWords(query);
    if (words.length === 0) return [];
    const scored = entries
      .map((entry) => {
        let score = 0;
        let matched = 0;
        for (const word of words) {
          const points =
            (entry.name.includes(word) ? 3 : 0) +
            (entry.summary.includes(word) ? 2 : 0) +
            (entry.rest.includes(word) ? 1 : 0);
          if (points > 0) matched++;
          score += points;
        }
        return { entry, score: score + (matched === words.length ? 100 : 0), matched };
      })
      .filter((candidate) => candidate.matched > 0)
      .sort(
        (left, right) =>
          right.score - left.score || left.entry.operation.name.length - right.entry.operation.name.length,
      );
    return scored.slice(0, count).map(({ entry: { operation } }) => ({
      name: operation.name,
      ...(operation.tags[0] ? { tag: operation.tags[0] } : {}),
      summary: oneLine(operation.summary ?? operation.description ?? `${operation.method} ${operation.path}`),
      signature: signatures.get(operation.name) ?? operation.name,
    }));
  };
}

/** Lower-case words of a query or a camelCase name ("reposCreateForAuthenticatedUser" → repos create for …). */
function splitWords(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((word) => word.length > 0);
}

function oneLine(text: string): string {
  const line = text.trim().split(/\n/)[0]!.trim();
  return line.length > 160 ? `${line.slice(0, 159)}…` : line;
}
