// A run's trace panel: every host call of every execution of the run (`GET …/runs/:runId/trace`), read when the
// panel is opened and again when the run moves on. One panel per run: a later status moves it to the end of the log.
import { button, element } from "./dom.js";
import { callsTable } from "./outcome.js";

/** The panels of the open thread's runs, by run id. */
const panels = new Map();

/** Forgets the panels of the thread that was open. */
export function clearTracePanels() {
  panels.clear();
}

/**
 * The trace panel of `runId` in `threadId` (made once per run; its content is read again on the next opening),
 * read through `api(method, path)`.
 */
export function tracePanel(api, threadId, runId) {
  let panel = panels.get(runId);
  if (panel === undefined) {
    panel = makePanel(api, threadId, runId);
    panels.set(runId, panel);
  }
  panel.stale();
  return panel.item;
}

function makePanel(api, threadId, runId) {
  const item = element("details", "item trace-panel");
  item.append(element("summary", "", "Trace: the run's host calls"));
  item.setAttribute("aria-label", `Trace of run ${runId}`);
  const body = element("div", "trace-body");
  item.append(body);
  let loaded = false;
  const path = (after) =>
    `/v1/threads/${encodeURIComponent(threadId)}/runs/${encodeURIComponent(runId)}/trace${after === undefined ? "" : `?after=${after}`}`;
  const load = async (after) => {
    if (after === undefined) body.replaceChildren(element("p", "quiet", "Reading the trace…"));
    try {
      const trace = await api("GET", path(after));
      if (after === undefined) body.replaceChildren();
      else body.lastElementChild?.remove();
      showTrace(body, trace, (next) => load(next));
    } catch (error) {
      body.replaceChildren(element("p", "warning", `The trace could not be read: ${error.message}`));
      loaded = false;
    }
  };
  item.addEventListener("toggle", () => {
    if (item.open && !loaded) {
      loaded = true;
      load(undefined);
    }
  });
  return {
    item,
    stale() {
      loaded = false;
      if (item.open) {
        loaded = true;
        load(undefined);
      }
    },
  };
}

/** Appends the trace's executions (and a "more" button when the page was cut) to `body`. */
function showTrace(body, trace, more) {
  if (trace.executions.length === 0 && body.childElementCount === 0) {
    body.append(element("p", "quiet", "No code ran in this run yet."));
  }
  for (const execution of trace.executions) {
    const state = execution.paused ? "paused for a person" : execution.ok ? "completed" : "failed";
    const title = `step ${execution.step} · ${state} · ${Math.round(execution.durationMs)} ms`;
    body.append(element("h4", "", title));
    if (execution.calls.length === 0) body.append(element("p", "quiet", "No host calls."));
    else body.append(callsTable(execution.calls, `Host calls of step ${execution.step} (${state})`));
  }
  if (trace.next !== undefined) {
    const next = button("Show more", "", "Show more of the trace");
    next.addEventListener("click", () => {
      next.disabled = true;
      more(trace.next);
    });
    body.append(next);
  }
}
