import { diagnosticText } from "./errors.ts";
import { SNIPPET_FILE } from "./snippet-file.ts";
import type { Diagnostic } from "./types.ts";

/** Options of `renderDiagnostics`. */
export interface RenderDiagnosticsOptions {
  /** Most diagnostics shown; the rest are counted in a last line. Default 5. */
  max?: number;
  /** File name shown in each location. Default `snippet.ts`. */
  fileName?: string;
}

const DEFAULT_MAX = 5;

/** Renders diagnostics as compact feedback for the model: errors first, earlier lines first, duplicates dropped. */
export function renderDiagnostics(diagnostics: Diagnostic[], options: RenderDiagnosticsOptions = {}): string {
  const max = Math.max(0, options.max ?? DEFAULT_MAX);
  const fileName = options.fileName ?? SNIPPET_FILE;
  const seen = new Set<string>();
  const unique = [...diagnostics]
    .sort(
      (a, b) =>
        severityRank(a.severity) - severityRank(b.severity) ||
        a.line - b.line ||
        a.column - b.column ||
        a.code - b.code,
    )
    .filter((diagnostic) => {
      const key = `${diagnostic.line}:${diagnostic.code}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  const shown = unique.slice(0, max).map((diagnostic) => {
    const head = `${fileName}:${diagnostic.line}:${diagnostic.column} - ${diagnosticText(diagnostic.severity, diagnostic.code, diagnostic.message)}`;
    return diagnostic.frame ? `${head}\n${diagnostic.frame}` : head;
  });
  const hidden = unique.length - shown.length;
  if (hidden > 0) shown.push(`… and ${hidden} more`);
  return shown.join("\n\n");
}

function severityRank(severity: Diagnostic["severity"]): number {
  return severity === "error" ? 0 : 1;
}
