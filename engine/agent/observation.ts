import { describeRequest, formatReturns, truncateMiddle } from "../format-value.ts";
import { renderDiagnostics } from "../render-diagnostics.ts";
import { SNIPPET_FILE } from "../snippet-file.ts";
import type { Execution, ExecutionError } from "../types.ts";

/** Size bounds of the observation text sent back to the model after an execution. */
export interface ObservationLimits {
  /** The whole observation. */
  maxChars: number;
  /** The stdout section alone (head and tail are kept, the middle is cut). */
  maxStdoutChars: number;
  /** The rendered return value. */
  maxReturnsChars: number;
  /** At most this many type diagnostics are listed. */
  maxDiagnostics: number;
}

export const DEFAULT_OBSERVATION_LIMITS: Readonly<ObservationLimits> = Object.freeze({
  maxChars: 12_000,
  maxStdoutChars: 6_000,
  maxReturnsChars: 3_000,
  maxDiagnostics: 10,
});

/** Shown when a successful execution printed nothing and returned nothing. */
export const NOTHING_OBSERVED = "The code ran without printing anything and returned undefined.";

/** The error text when the checker rejected the code; the diagnostics follow in their own section. */
export const NOT_TYPE_CHECKED = "The code has errors (listed below), so it did not run.";

/** Shown after a failed execution, so the model knows what is expected next. */
export const FAILURE_HINT =
  "The code failed. Fix it and run it again, or answer in plain text if the task cannot be done.";

function formatError(error: ExecutionError): string {
  const lines = [`${error.name}: ${error.message}`];
  if (error.line !== undefined) {
    lines.push(`at ${SNIPPET_FILE}:${error.line}${error.column === undefined ? "" : `:${error.column}`}`);
  }
  if (error.frame) lines.push(error.frame);
  if (error.stack && error.kind === "runtime") {
    const frames = error.stack.split("\n").filter((line) => /^\s*at /.test(line));
    if (frames.length > 0) lines.push(frames.join("\n"));
  }
  return lines.join("\n");
}

/** Said after a paused execution: the model does not see it, the person deciding does (the CLI prints it). */
export const PAUSED_NOTE =
  "The code paused, waiting for a person; once they answer, it runs again from the start with their answers.";

/** The text an observation holds for the images its code showed (the images themselves follow it). */
export function imagesNote(count: number): string {
  return `${count} image(s) shown with moss.show follow this observation.`;
}

/**
 * Renders one execution as the observation the model reads: status, error with code frame, type
 * diagnostics, stdout, return value and warnings, each bounded, the whole bounded by `maxChars`.
 */
export function renderObservation(execution: Execution, limits: Partial<ObservationLimits> = {}): string {
  const bounds = { ...DEFAULT_OBSERVATION_LIMITS, ...limits };
  const sections: string[] = [`<execution ok="${execution.ok}">`];
  const section = (tag: string, body: string, attributes = "") =>
    sections.push(`<${tag}${attributes}>\n${body}\n</${tag}>`);
  if (execution.error !== undefined) {
    const diagnostics = execution.error.diagnostics ?? [];
    const body = diagnostics.length > 0 ? NOT_TYPE_CHECKED : formatError(execution.error);
    section("error", body, ` kind="${execution.error.kind}"`);
    if (diagnostics.length > 0)
      section("diagnostics", renderDiagnostics(diagnostics, { max: bounds.maxDiagnostics }));
  }
  if (execution.stdout !== "")
    section("stdout", truncateMiddle(execution.stdout.replace(/\n$/, ""), bounds.maxStdoutChars));
  if (execution.ok && execution.returns !== undefined) {
    section("returns", truncateMiddle(formatReturns(execution.returns), bounds.maxReturnsChars));
  }
  if (execution.images !== undefined && execution.images.length > 0) {
    section("images", imagesNote(execution.images.length));
  }
  if (execution.warnings.length > 0) {
    section("warnings", execution.warnings.map((warning) => `- ${warning}`).join("\n"));
  }
  if (execution.pending !== undefined) {
    section(
      "pending",
      execution.pending.requests.map((request) => `- ${describeRequest(request)}`).join("\n"),
    );
  }
  if (execution.ok && sections.length === 1) sections.push(NOTHING_OBSERVED);
  if (execution.pending !== undefined) sections.push(PAUSED_NOTE);
  else if (!execution.ok) sections.push(FAILURE_HINT);
  sections.push("</execution>");
  const text = sections.join("\n");
  if (text.length <= bounds.maxChars) return text;
  const closing = "\n</execution>";
  return `${truncateMiddle(text.slice(0, text.length - closing.length), bounds.maxChars - closing.length)}${closing}`;
}

/** The observation that closes a paused step that will not resume; `why` completes "… waiting for a person, and …". */
export function notResumedObservation(why: string): string {
  return `<execution ok="false">\n<error kind="not-resumed">\nThis code paused, waiting for a person, and ${why}. Nothing it did persisted.\n</error>\n</execution>`;
}

/** The observation of an action that had no code to run, saying why. */
export function noCodeObservation(why: string): string {
  return `<execution ok="false">\n<error kind="no-code">\n${why}\n</error>\n</execution>`;
}
