// The studio's side panel of the open thread: the data fields of `moss` as its last `session` event left them (what
// changed marked), and the module prompt the model reads (GET /prompt), as text. DOM through textContent only.
import { element } from "./dom.js";

const $ = (id) => document.getElementById(id);

/** Empties the panel for another thread (or none). */
export function resetSession() {
  $("session-fields").replaceChildren(element("p", "quiet", "No run has changed the session yet."));
  $("session-when").textContent = "";
  const show = $("show-prompt");
  show.setAttribute("aria-expanded", "false");
  show.textContent = "Show the prompt";
  $("prompt-view").replaceChildren();
  $("prompt-view").hidden = true;
}

/** The fields of a `session` event: each field's name, "changed" when it did, and its JSON text. */
export function showSession(data) {
  const list = element("dl", "fields");
  const names = Object.keys(data.fields ?? {});
  for (const name of names) {
    const term = element("dt", "", name);
    if (data.changed?.includes(name)) term.append(" ", element("span", "changed", "changed"));
    const value = element("dd");
    value.append(element("pre", "field-value", data.fields[name]));
    list.append(term, value);
  }
  $("session-fields").replaceChildren(
    names.length === 0 ? element("p", "quiet", "moss has no data fields.") : list,
  );
  $("session-when").textContent = `after step ${data.step} of run ${data.runId}`;
}

/** One line in the conversation after an execution: which data fields it changed. */
export function sessionLine(data) {
  const changed = data.changed ?? [];
  return element(
    "div",
    "status",
    changed.length === 0
      ? `session after step ${data.step}: no data field changed`
      : `session after step ${data.step}: ${changed.join(", ")} changed`,
  );
}

/**
 * Wires the prompt button: it shows the module prompt of `threadOf()`'s thread as code-styled text (the operator's
 * instructions first, when set), fetched with `api` each time it opens, or hides it.
 */
export function wirePrompt(api, threadOf) {
  const show = $("show-prompt");
  show.addEventListener("click", async () => {
    const view = $("prompt-view");
    if (show.getAttribute("aria-expanded") === "true") {
      show.setAttribute("aria-expanded", "false");
      show.textContent = "Show the prompt";
      view.hidden = true;
      return;
    }
    const threadId = threadOf();
    view.hidden = false;
    if (threadId === undefined) {
      view.replaceChildren(element("p", "quiet", "Open or start a thread to see its prompt."));
      return;
    }
    view.replaceChildren(element("p", "quiet", "Loading the prompt…"));
    show.setAttribute("aria-expanded", "true");
    show.textContent = "Hide the prompt";
    try {
      const prompt = await api("GET", `/v1/threads/${encodeURIComponent(threadId)}/prompt`);
      const parts = [element("p", "meta", `module ${prompt.module}`)];
      if (prompt.instructions) {
        parts.push(element("h3", "", "Instructions"), element("pre", "prompt-text", prompt.instructions));
      }
      const text = element("pre", "prompt-text", prompt.prompt);
      text.setAttribute("aria-label", "Module prompt");
      parts.push(element("h3", "", "Module prompt"), text);
      view.replaceChildren(...parts);
    } catch (error) {
      view.replaceChildren(
        element(
          "p",
          "error",
          error.code === "thread-not-found"
            ? "This thread has not been created yet: send a task first."
            : error.message,
        ),
      );
    }
  });
}
