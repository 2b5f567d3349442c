// One execution's outcome as its `execution` event carries it: status, returned value (pretty-printed, folded when
// large), stdout, the error with its code frame, type-check diagnostics, warnings, and the host calls it made (their
// arguments, results and errors as the server keeps them: bounded, redacted, or sizes only).
import { element } from "./dom.js";

/** A returned value longer than this (lines or characters) starts folded. */
const FOLD_LINES = 12;
const FOLD_CHARS = 800;

/** `value` as people read it: JSON with two-space indentation, `undefined` and functions named. */
export function pretty(value) {
  if (value === undefined) return "undefined";
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

/** The card of one `execution` event. */
export function outcomeCard(data) {
  const execution = data.execution;
  const status = execution.ok ? "completed" : execution.pending ? "paused" : "failed";
  const item = element("section", `item execution ${status}`);
  item.setAttribute("aria-label", `Outcome of step ${data.step ?? "?"}: ${status}`);
  const label = element("div", "label", execution.ok ? "output" : execution.pending ? "paused" : "failed");
  if (typeof execution.durationMs === "number") {
    label.append(element("span", "meta", ` · ${Math.round(execution.durationMs)} ms`));
  }
  item.append(label);
  if (execution.pending) item.append(element("p", "", "The code waits for a person's answer below."));
  if (execution.error) item.append(errorBlock(execution.error));
  if (execution.stdout) {
    item.append(element("h4", "", "stdout"), element("pre", "stdout", execution.stdout));
  }
  if (execution.ok && "returns" in execution && execution.returns !== undefined) {
    item.append(returnedBlock(execution.returns));
  }
  if (execution.ok && !execution.stdout && execution.returns === undefined) {
    item.append(element("p", "quiet", "The code ran and returned nothing."));
  }
  if (execution.images?.length) {
    // Counted here; the observation message that carries them draws them (message-images.js, through blob: URLs).
    item.append(element("p", "meta", `${execution.images.length} image(s) shown with moss.show`));
  }
  for (const warning of execution.warnings ?? []) item.append(element("p", "warning", `warning: ${warning}`));
  if (Array.isArray(execution.calls) && execution.calls.length > 0) item.append(callsBlock(execution.calls));
  return item;
}

function returnedBlock(value) {
  const text = pretty(value);
  const pre = element("pre", "returns", text);
  const large = text.split("\n").length > FOLD_LINES || text.length > FOLD_CHARS;
  if (!large) {
    const block = element("div", "");
    block.append(element("h4", "", "returned"), pre);
    return block;
  }
  const details = element("details", "returned");
  const summary = element("summary", "", `returned (${text.split("\n").length} lines)`);
  details.append(summary, pre);
  return details;
}

function errorBlock(error) {
  const block = element("div", "error-block");
  const message = `${error.name ?? "Error"}: ${error.message}`;
  block.append(element("pre", "error", message));
  // A frame is shown once: the message often holds it already, and a diagnostic's is often the error's.
  const shown = [message];
  const once = (frame) => {
    if (!frame || shown.some((text) => text.includes(frame.trimEnd()))) return false;
    shown.push(frame);
    return true;
  };
  const where =
    error.line === undefined ? "" : ` at line ${error.line}${error.column ? `:${error.column}` : ""}`;
  if (error.kind) block.append(element("p", "meta", `${error.kind} error${where}`));
  if (once(error.frame)) block.append(element("pre", "frame", error.frame));
  if (Array.isArray(error.diagnostics) && error.diagnostics.length > 0) {
    block.append(element("h4", "", "type-check"));
    const list = element("ul", "diagnostics");
    list.setAttribute("aria-label", "Type-check diagnostics");
    for (const diagnostic of error.diagnostics) {
      const entry = element(
        "li",
        "",
        `${diagnostic.severity ?? "error"} TS${diagnostic.code} at line ${diagnostic.line}:${diagnostic.column}: ${diagnostic.message}`,
      );
      if (once(diagnostic.frame)) entry.append(element("pre", "frame", diagnostic.frame));
      list.append(entry);
    }
    block.append(list);
  }
  if (error.stack) {
    const details = element("details", "");
    details.append(element("summary", "", "stack"), element("pre", "frame", error.stack));
    block.append(details);
  }
  return block;
}

const OUTCOMES = {
  value: "ran",
  error: "threw",
  replayed: "replayed",
  denied: "denied",
  pending: "waits for a person",
};

/** A person's answer to a call's approval request, in words. */
const APPROVALS = { approved: "approved by a person", denied: "denied by a person" };

/** The run's host calls (`execution.calls`), folded under a summary. */
function callsBlock(calls) {
  const details = element("details", "calls");
  details.append(element("summary", "", `host calls (${calls.length})`));
  details.append(callsTable(calls, "Host calls of this execution"));
  return details;
}

/**
 * A table of host calls (`HostCallRecord`s): what, where, how it ended (and whether a person approved it), how long,
 * the arguments and the result or error as the server kept them (a cut one ends with its `… (truncated, n bytes)`
 * marker), and the bytes each way.
 */
export function callsTable(calls, label) {
  const table = element("table", "trace");
  table.setAttribute("aria-label", label);
  const head = element("tr", "");
  for (const title of ["call", "line", "outcome", "time", "arguments", "result or error", "bytes in / out"])
    head.append(element("th", "", title));
  table.append(head);
  for (const call of calls) {
    const row = element("tr", call.outcome === "denied" || call.outcome === "error" ? "failed" : "");
    const outcome = [OUTCOMES[call.outcome] ?? call.outcome, APPROVALS[call.approval]]
      .filter(Boolean)
      .join(", ");
    const result = call.error ?? call.result;
    row.append(
      element("td", "mono nowrap", call.member),
      element("td", "nowrap", call.line === undefined ? "?" : String(call.line)),
      element("td", "", outcome),
      element("td", "nowrap", `${formatMs(call.durationMs)} ms`),
      payloadCell(call.args),
      payloadCell(result, call.error === undefined ? "" : "error"),
      element("td", "", `${call.argsBytes ?? "?"} / ${call.resultBytes ?? "–"}`),
    );
    table.append(row);
  }
  return table;
}

/** A payload's cell: its text (a long one scrolls within a few lines), or a dash when the trace kept none. */
function payloadCell(text, className = "") {
  if (text === undefined) return element("td", "quiet", "–");
  const cell = element("td", `mono payload ${className}`.trim());
  cell.append(element("div", "payload-text", text));
  return cell;
}

function formatMs(ms) {
  const value = Number(ms ?? 0);
  return value > 0 && value < 10 ? value.toFixed(1) : String(Math.round(value));
}
