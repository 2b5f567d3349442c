/** Stable codes of every error moss-ts raises for misuse or bad input (never for faults of the model's code). */
export type MossErrorCode =
  | "module-not-found"
  | "module-syntax"
  | "module-import"
  | "module-load"
  | "module-type-error"
  | "moss-member-reserved"
  | "hook-shape"
  | "hook-failed"
  | "binding-missing"
  | "container-closed"
  | "already-compiled"
  | "runtime-closed"
  | "concurrent-execute"
  | "run-stopped"
  | "context-corrupt"
  | "context-locked"
  | "context-invalid"
  | "context-mismatch"
  | "context-wrong-module"
  | "context-read"
  | "context-write"
  | "sandbox-failed"
  | "queue-full"
  | "model-request"
  | "model-auth"
  | "model-not-found"
  | "model-connection"
  | "invalid-argument"
  | "wire-invalid"
  | "wire-limit"
  | "continuation-invalid"
  | "credential-missing"
  | "schema-too-large"
  | "database-error"
  | "config-invalid";

const BRAND = Symbol.for("moss-ts.MossError");

/** The one base error of moss-ts: a stable `code`, a readable message and structured `details`. */
export class MossError extends Error {
  override readonly name: string = "MossError";
  readonly code: MossErrorCode;
  readonly details: Record<string, unknown>;
  readonly [BRAND] = true;

  constructor(
    code: MossErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.code = code;
    this.details = details;
  }

  /** Brand check that works across realms and copies, unlike `instanceof`. */
  static is(value: unknown, code?: MossErrorCode): value is MossError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[BRAND] === true &&
      (code === undefined || (value as MossError).code === code)
    );
  }
}

/**
 * The lines of `source` around `line` (`context` on each side), the line marked and a caret under its 1-based
 * `column`; no caret when the column is unknown (below 1).
 */
export function codeFrame(source: string, line: number, column: number, context = 1): string {
  const lines = source.split(/\r?\n/);
  const first = Math.max(1, line - context);
  const last = Math.min(lines.length, line + context);
  const width = String(last).length;
  const out: string[] = [];
  for (let n = first; n <= last; n++) {
    const marker = n === line ? ">" : " ";
    out.push(`${marker} ${String(n).padStart(width)} | ${lines[n - 1] ?? ""}`);
    if (n === line && column >= 1) out.push(`  ${" ".repeat(width)} | ${" ".repeat(column - 1)}^`);
  }
  return out.join("\n");
}

/** Builds the message of an error located in a source file: `file:line:col - message` and a code frame. */
export function locatedMessage(
  file: string,
  source: string | undefined,
  line: number,
  column: number,
  message: string,
): string {
  const head = `${file}:${line}:${column} - ${message}`;
  return source === undefined ? head : `${head}\n\n${codeFrame(source, line, column)}`;
}

/**
 * A diagnostic as tsc words it after its location: `error TS2322: message` (moss-ts's own findings, codes 90000 and
 * up, `MOSS90001`). The one spelling of every diagnostic shown: the snippet's (`renderDiagnostics`, for the model,
 * `moss check` and `moss run`) and the context module's own type and syntax errors.
 */
export function diagnosticText(severity: string, code: number, message: string): string {
  return `${severity} ${code >= 90000 ? "MOSS" : "TS"}${code}: ${message}`;
}
