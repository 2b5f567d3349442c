import { DEFAULT_TYPE_CHECK_TIMEOUT_MS, type WorkerModuleChecker } from "../check/index.ts";
import { codeFrame } from "../errors.ts";
import { renderDiagnostics } from "../render-diagnostics.ts";
import type { Diagnostic, ExecuteRequest, ExecutionError, ExecutionLimits, TypeCheckMode } from "../types.ts";
import { type PreparedSnippet, prepareSnippet } from "./prepare-snippet.ts";

/** What an execute's snippet is checked with: the mode, the runtime's limits, the module's checker, the hints. */
export interface SnippetCheck {
  mode: TypeCheckMode;
  /** The runtime's limits (the request's own come first). */
  limits: ExecutionLimits;
  /** The module's checker (made when first asked for: a check that is `off` never makes it). */
  checker: () => WorkerModuleChecker;
  /** Adds to the diagnostics why a name an earlier snippet declared is not known (see `SessionDefinitions.hint`). */
  hint: (diagnostics: Diagnostic[]) => Diagnostic[];
  /** When the execute started (a `performance.now()` time): its wall-time limit bounds the check from then. */
  started: number;
}

/**
 * The model's code, type-checked (unless the mode is `off`) and compiled for a run; or the error that stops it
 * before it runs (a type error when the mode is `strict`, a syntax error). The check's other diagnostics are added to
 * `warnings`.
 */
export async function checkedSnippet(
  code: string,
  request: ExecuteRequest,
  check: SnippetCheck,
  warnings: string[],
): Promise<{ prepared: PreparedSnippet } | { error: ExecutionError }> {
  let preparing: ReturnType<typeof prepareSnippet> | undefined;
  if (check.mode !== "off") {
    // The execute's wall-time limit bounds its type-check too, from the execute's start: waiting for the module's
    // checker (behind other sessions' checks) and for a worker counts, so a type bomb, this session's or another's,
    // cannot hold this execute past its own limit. Loading a new worker does not count (`startTimeoutMs` bounds it).
    const wallTimeMs = request.timeoutMs ?? request.limits?.wallTimeMs ?? check.limits.wallTimeMs;
    const timeoutMs = Math.min(
      request.limits?.typeCheckTimeoutMs ?? check.limits.typeCheckTimeoutMs ?? DEFAULT_TYPE_CHECK_TIMEOUT_MS,
      wallTimeMs,
    );
    const checking = check
      .checker()
      .check(code, { timeoutMs, deadlineMs: wallTimeMs, startedAt: check.started });
    // The snippet compiles on the host while its check runs in the worker (started once the check is posted); the
    // check's verdict still comes first.
    preparing = new Promise<void>((resolve) => setImmediate(resolve)).then(() => prepareSnippet(code));
    preparing.catch(() => {});
    const diagnostics = check.hint(await checking);
    const errors = diagnostics.filter((diagnostic) => diagnostic.severity === "error");
    if (errors.length > 0 && check.mode === "strict") return { error: typeError(errors, code) };
    if (diagnostics.length > 0) warnings.push(renderDiagnostics(diagnostics));
  }
  const prepared = await (preparing ?? prepareSnippet(code));
  if ("script" in prepared) return { prepared };
  return {
    error: {
      kind: "syntax",
      name: "SyntaxError",
      message: prepared.message,
      line: prepared.line,
      column: prepared.column,
      frame: codeFrame(code, prepared.line, prepared.column, 0),
    },
  };
}

/** The error of code the type-check refused (`syntax` when every diagnostic is a syntax error). */
function typeError(errors: Diagnostic[], code: string): ExecutionError {
  const first = errors[0]!;
  const syntax = errors.every((diagnostic) => diagnostic.code >= 1000 && diagnostic.code < 2000);
  return {
    kind: syntax ? "syntax" : "type",
    name: syntax ? "SyntaxError" : "TypeError",
    message: renderDiagnostics(errors),
    line: first.line,
    column: first.column,
    frame: first.frame ?? codeFrame(code, first.line, first.column, 0),
    diagnostics: errors,
  };
}
