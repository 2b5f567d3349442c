// The studio page of `moss serve`: the tenant's threads, and each thread's conversation as its event stream tells it
// (the model's prose as markdown, its program once as highlighted code, each execution's outcome, approvals and
// questions, the run's life). It talks only to the native API v1. Every text the model controls reaches the DOM
// through textContent, or through markdown-it with raw HTML off (prose.js).
import { createParser } from "eventsource-parser";
import { codeView } from "./code-view.js";
import { button, element, labelledInput } from "./dom.js";
import { forgetImages, messageImages } from "./message-images.js";
import { outcomeCard } from "./outcome.js";
import { renderProse } from "./prose.js";
import { decisionWords, requestCard } from "./requests.js";
import { resetSession, sessionLine, showSession, wirePrompt } from "./session-panel.js";
import { clearTracePanels, tracePanel } from "./trace.js";

const $ = (id) => document.getElementById(id);
const state = {
  token: sessionStorage.getItem("moss.token") ?? "",
  threadId: undefined,
  stream: undefined,
  /** Controls of each run's request cards, by run id: turned off once the run is no longer paused. */
  runs: new Map(),
  /** The request cards of the open thread, by request id. */
  requests: new Map(),
  /** The assistant's prose being written now: { item, body, raw, program }. */
  text: undefined,
  /** The last prose item of the step whose code card comes next. */
  lastText: undefined,
};

/** The run's life in words, from its `run-status` events. */
const LIFE = {
  queued: "queued",
  running: "running",
  pending: "waiting for a person",
  completed: "completed",
  failed: "failed",
  cancelled: "cancelled",
};

async function api(method, path, body, headers = {}) {
  const response = await fetch(path, {
    method,
    headers: {
      authorization: `Bearer ${state.token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  const parsed = text === "" ? {} : JSON.parse(text);
  if (!response.ok) {
    const error = new Error(parsed.error?.message ?? `HTTP ${response.status}`);
    error.status = response.status;
    error.code = parsed.error?.code;
    throw error;
  }
  return parsed;
}

function showError(message) {
  const item = element("div", "item error");
  item.setAttribute("role", "alert");
  item.append(element("div", "label", "error"), element("div", "", message));
  append(item);
}

function append(node) {
  const log = $("log");
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  log.append(node);
  if (atBottom) log.scrollTop = log.scrollHeight;
}

async function signIn(token) {
  state.token = token;
  try {
    await api("GET", "/v1/threads?limit=1");
  } catch (error) {
    $("signin-error").textContent =
      error.status === 401 ? "That token is not one this server knows." : error.message;
    state.token = "";
    sessionStorage.removeItem("moss.token");
    return;
  }
  sessionStorage.setItem("moss.token", token);
  $("signin").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = false;
  await listThreads();
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("thread");
  if (fromHash) openThread(fromHash);
  else $("message").focus();
}

async function listThreads() {
  const { threads } = await api("GET", "/v1/threads?limit=100");
  const list = $("threads");
  list.replaceChildren();
  for (const thread of threads) {
    const title = thread.metadata?.title ?? thread.id;
    const entry = element("li", "thread-entry");
    const open = button(title, "thread");
    open.dataset.threadId = thread.id;
    open.title = title;
    open.setAttribute("aria-current", String(thread.id === state.threadId));
    open.addEventListener("click", () => openThread(thread.id));
    const rename = button("Rename", "rename", `Rename thread ${title}`);
    rename.addEventListener("click", () => renameForm(entry, thread, title, rename));
    const remove = button("Delete", "delete", `Delete thread ${title}`);
    remove.addEventListener("click", () => confirmDelete(entry, thread.id, title, remove));
    entry.append(open, rename, remove);
    list.append(entry);
  }
  if (threads.length === 0) list.append(element("li", "quiet", "No threads yet: send a task."));
}

/** Rename in place: the thread's name is its metadata's `title` (the rest of its metadata is kept). */
function renameForm(entry, thread, title, rename) {
  const form = element("form", "rename-form");
  form.setAttribute("aria-label", `Rename ${title}`);
  const { label, input } = labelledInput(`rename-${thread.id}`, "New name", "rename-input", 200);
  input.value = title;
  const save = element("button", "", "Save");
  save.type = "submit";
  save.setAttribute("aria-label", `Save the new name of ${title}`);
  const keep = button("Cancel", "", `Keep the name ${title}`);
  const problem = element("span", "meta");
  problem.setAttribute("role", "status");
  form.append(label, input, save, keep, problem);
  rename.hidden = true;
  entry.append(form);
  const close = () => {
    form.remove();
    rename.hidden = false;
    rename.focus();
  };
  keep.addEventListener("click", close);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") close();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = input.value.trim();
    if (name === "" || name === title) return close();
    save.disabled = true;
    try {
      const metadata = { ...(thread.metadata ?? {}), title: name };
      await api("PATCH", `/v1/threads/${encodeURIComponent(thread.id)}`, { metadata });
      await listThreads();
      const renamed = [...$("threads").querySelectorAll("button.thread")];
      renamed.find((entry) => entry.dataset.threadId === thread.id)?.focus();
    } catch (error) {
      save.disabled = false;
      problem.textContent = error.message;
    }
  });
  input.focus();
  input.select();
}

/** Delete asks once more in place (Delete / Keep), then deletes the thread with all it stored. */
function confirmDelete(entry, threadId, title, remove) {
  const ask = element("div", "confirm");
  ask.setAttribute("role", "group");
  ask.setAttribute("aria-label", `Delete ${title}?`);
  const yes = button("Delete for good", "danger", `Delete thread ${title} and everything it stored`);
  const no = button("Keep", "", `Keep thread ${title}`);
  ask.append(element("span", "", "Delete it and all its runs?"), yes, no);
  remove.hidden = true;
  entry.append(ask);
  no.addEventListener("click", () => {
    ask.remove();
    remove.hidden = false;
    remove.focus();
  });
  yes.addEventListener("click", async () => {
    yes.disabled = true;
    try {
      await api("DELETE", `/v1/threads/${encodeURIComponent(threadId)}`);
      if (threadId === state.threadId) newThread();
    } catch (error) {
      // A run a worker is running holds its thread: cancel it first.
      ask.replaceChildren(
        element(
          "span",
          "",
          error.code === "thread-busy" ? "A run is running: cancel it first." : error.message,
        ),
      );
      remove.hidden = false;
    }
    await listThreads().catch(() => {});
  });
  yes.focus();
}

function openThread(threadId) {
  state.stream?.abort();
  state.threadId = threadId;
  state.runs = new Map();
  state.requests = new Map();
  state.text = undefined;
  state.lastText = undefined;
  clearTracePanels();
  history.replaceState(null, "", `#thread=${encodeURIComponent(threadId)}`);
  for (const entry of $("threads").querySelectorAll("button.thread")) {
    entry.setAttribute("aria-current", String(entry.dataset.threadId === threadId));
  }
  $("log").replaceChildren();
  forgetImages();
  resetSession();
  setRun(undefined);
  showLife(undefined);
  follow(threadId);
}

function newThread() {
  state.stream?.abort();
  state.threadId = undefined;
  clearTracePanels();
  history.replaceState(null, "", location.pathname);
  $("log").replaceChildren();
  forgetImages();
  resetSession();
  setRun(undefined);
  showLife(undefined);
  $("connection").textContent = "";
  for (const entry of $("threads").querySelectorAll("button.thread"))
    entry.setAttribute("aria-current", "false");
  $("message").focus();
}

/** Reads the thread's stored events from the start and then live, reconnecting with Last-Event-ID when cut. */
async function follow(threadId) {
  const controller = new AbortController();
  state.stream = controller;
  let cursor = 0;
  while (!controller.signal.aborted) {
    try {
      const response = await fetch(`/v1/threads/${encodeURIComponent(threadId)}/events`, {
        headers: { authorization: `Bearer ${state.token}`, "last-event-id": String(cursor) },
        signal: controller.signal,
      });
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        $("connection").textContent = "disconnected";
        if (body.error?.code === "thread-not-found") threadGone(threadId);
        else showError(body.error?.message ?? `The event stream answered ${response.status}.`);
        return;
      }
      $("connection").textContent = "connected";
      const parser = createParser({
        onEvent(event) {
          const id = Number(event.id);
          if (!(id > cursor)) return;
          cursor = id;
          render(event.event, JSON.parse(event.data));
        },
      });
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      while (true) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(value);
      }
    } catch {
      if (controller.signal.aborted) return;
    }
    $("connection").textContent = "reconnecting…";
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/**
 * The open thread was deleted (the server's 404 `thread-not-found`, to the stream or to Cancel): its runs went with it,
 * so there is nothing to cancel or answer. Said once per thread, in the log, and the thread leaves the list.
 */
function threadGone(threadId) {
  if (threadId !== state.threadId || state.gone === threadId) return;
  state.gone = threadId;
  setRun(undefined);
  for (const control of [...state.runs.values()].flat()) control.disabled = true;
  append(
    element("div", "status", "this thread was deleted: its runs went with it, there is nothing to cancel"),
  );
  listThreads().catch(() => {});
}

function setRun(run) {
  state.activeRun =
    run !== undefined && ["queued", "running", "pending"].includes(run.status) ? run : undefined;
  $("cancel").disabled = state.activeRun === undefined;
}

/** The run's life at the top of the conversation: queued, running, waiting for a person, completed, failed, cancelled. */
function showLife(status, runId) {
  const life = $("life");
  if (status === undefined) {
    life.hidden = true;
    life.textContent = "";
    delete life.dataset.status;
    return;
  }
  state.lifeRun = runId;
  life.hidden = false;
  life.dataset.status = status;
  life.textContent = `run ${LIFE[status] ?? status}`;
}

/** An agent event of a run shows the run is running, whatever the last `run-status` said. */
function running(data) {
  if (data.runId !== undefined && $("life").dataset.status === "queued" && state.lifeRun === data.runId) {
    showLife("running", data.runId);
  }
}

function render(type, data) {
  if (type !== "run-status") running(data);
  switch (type) {
    case "message":
      if (data.message.role === "user" && data.message.metadata?.kind === "task") {
        const item = element("div", "item user", data.message.content);
        item.setAttribute("aria-label", "Your task");
        append(item);
        if (data.message.images?.length) {
          append(element("p", "attachments user-images", imagesLine(data.message.images)));
          append(imagesOf(data.message, "Images attached to your task"));
        }
      } else if (data.message.role !== "assistant" && data.message.images?.length) {
        const shown = imagesOf(data.message, "Images the code showed");
        shown.classList.add("shown");
        append(shown);
      } else if (data.message.role === "assistant") {
        const content = data.message.content ?? "";
        if (state.text !== undefined) setProse(state.text, content);
        else if (content.trim() !== "") {
          state.text = textItem(content);
          append(state.text.item);
        }
        state.lastText = state.text;
        state.text = undefined;
      }
      break;
    case "text-delta":
      if (state.text === undefined) {
        state.text = textItem("");
        append(state.text.item);
      }
      setProse(state.text, state.text.raw + data.delta);
      break;
    case "code": {
      // The program runs from a fence of the prose (tools off) or a tool call: shown here once, not in the prose.
      const prose = state.text ?? state.lastText;
      if (prose !== undefined) {
        prose.program = data.code;
        setProse(prose, prose.raw);
      }
      state.lastText = undefined;
      const item = element("section", "item code");
      item.setAttribute("aria-label", `Program of step ${data.step}`);
      item.append(element("div", "label", `code · step ${data.step}`), codeView(data.code));
      append(item);
      break;
    }
    case "execution":
      decisionsFromCalls(data);
      append(outcomeCard(data));
      break;
    case "approval-request":
    case "clarification-request": {
      const card = requestCard(data, (value) =>
        api(
          "POST",
          `/v1/threads/${encodeURIComponent(state.threadId)}/answers`,
          // The answer is for this request of this run: the server applies it to nothing else.
          { runId: data.runId, answers: { [data.request.id]: value } },
          { "idempotency-key": `${data.runId}:${data.request.id}` },
        ),
      );
      const list = state.runs.get(data.runId) ?? [];
      list.push(...card.controls);
      state.runs.set(data.runId, list);
      state.requests.set(data.request.id, { ...card, runId: data.runId, request: data.request });
      append(card.item);
      break;
    }
    case "answer": {
      // The decision as the thread recorded it: who, when, approved or denied, the reason (also after a reload).
      const card = state.requests.get(data.requestId);
      if (card === undefined) break;
      card.record(decisionWords(data));
      card.inferred = false;
      break;
    }
    case "session":
      showSession(data);
      append(sessionLine(data));
      break;
    case "error":
      showError(data.message);
      break;
    case "notice":
      append(element("div", "status", `notice: ${data.message}`));
      break;
    case "context-trimmed":
      append(element("div", "status", data.message));
      break;
    case "run-end":
      if (data.stopReason === "answer" && data.answer !== undefined) {
        // The model's last prose is the answer: mark it as such rather than showing it twice.
        const last = state.lastText;
        if (last !== undefined && last.item === $("log").lastElementChild && last.raw === data.answer) {
          last.item.remove();
        }
        const item = element("section", "item answer");
        item.setAttribute("aria-label", "Answer");
        const body = element("div", "prose");
        body.append(renderProse(data.answer));
        item.append(element("div", "label", "answer"), body);
        append(item);
      } else if (data.stopReason !== "pending") {
        showError(`The run stopped: ${data.reason}`);
      }
      state.lastText = undefined;
      break;
    case "run-status": {
      setRun(data.run);
      if (data.status !== "pending") settleRequests(data.run.id, data.status);
      showLife(data.status, data.run.id);
      append(element("div", "status", `run ${LIFE[data.status] ?? data.status}`));
      // A run that paused or ended has a trace to read: its one panel moves here, read again when opened.
      if (!["queued", "running"].includes(data.status) && state.threadId !== undefined)
        append(tracePanel(api, state.threadId, data.run.id));
      if (data.status === "queued") listThreads().catch(() => {});
      break;
    }
  }
}

/**
 * The run went on past its pause (or ended): its request cards take no answer now. A card answered in this page, or
 * whose `answer` event came, says its decision already; one without (answered before the thread recorded answers)
 * says what the events tell: the run moved on.
 */
function settleRequests(runId, status) {
  for (const control of state.runs.get(runId) ?? []) control.disabled = true;
  for (const card of state.requests.values()) {
    if (card.runId !== runId || !card.decision.hidden) continue;
    card.decided(
      status === "cancelled"
        ? "Not answered: the run was cancelled."
        : status === "failed"
          ? "The run failed."
          : "Answered (the run went on).",
    );
    card.inferred = true;
  }
}

/**
 * What the resumed code did with an approved or denied call, from the execution's host calls (member and line): the
 * decision of a card answered elsewhere, or before this page was loaded.
 */
function decisionsFromCalls(data) {
  for (const card of state.requests.values()) {
    if (card.runId !== data.runId || !card.inferred || card.request.kind !== "approval") continue;
    const request = card.request;
    const member = request.service === undefined ? request.member : `${request.service}.${request.member}`;
    const call = (data.execution.calls ?? []).find(
      (entry) => entry.member === member && entry.line === request.line && entry.outcome !== "pending",
    );
    if (call === undefined) continue;
    card.decided(call.outcome === "denied" ? "Denied (the call did not run)." : "Approved (the call ran).");
    card.inferred = false;
  }
}

/** The message's images drawn, each fetched with the token from the thread's image route. */
function imagesOf(message, label) {
  const threadId = state.threadId;
  return messageImages(message, label, async (index) => {
    const response = await fetch(
      `/v1/threads/${encodeURIComponent(threadId)}/messages/${encodeURIComponent(message.id)}/images/${index}`,
      { headers: { authorization: `Bearer ${state.token}` } },
    );
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    return response.blob();
  });
}

/** "2 images attached: desk.png (image/png), a URL (image/jpeg)". */
function imagesLine(images) {
  const names = images.map(
    (image) => `${image.name ?? (image.url ? "a URL" : "an image")} (${image.mediaType})`,
  );
  return `${images.length} image${images.length === 1 ? "" : "s"} attached: ${names.join(", ")}`;
}

/** The files chosen to go with the next message, as the API's `images` (base64 data, media type, file name). */
async function chosenImages() {
  const files = [...($("images").files ?? [])];
  return Promise.all(
    files.map(async (file) => {
      const bytes = new Uint8Array(await file.arrayBuffer());
      let binary = "";
      for (let index = 0; index < bytes.length; index += 0x8000) {
        binary += String.fromCharCode(...bytes.subarray(index, index + 0x8000));
      }
      return { mediaType: file.type, data: btoa(binary), name: file.name };
    }),
  );
}

function textItem(content) {
  const item = element("section", "item text");
  item.setAttribute("aria-label", "Assistant");
  const body = element("div", "prose");
  item.append(element("div", "label", "assistant"), body);
  const text = { item, body, raw: "", program: undefined };
  setProse(text, content);
  return text;
}

/** Renders the prose again (markdown is re-read as it streams; the program's fence leaves once its code is known). */
function setProse(text, raw) {
  text.raw = raw;
  text.body.replaceChildren(renderProse(raw, text.program));
  text.item.hidden = text.body.textContent.trim() === "";
}

$("signin").addEventListener("submit", (event) => {
  event.preventDefault();
  signIn($("token").value.trim());
});
$("signout").addEventListener("click", () => {
  sessionStorage.removeItem("moss.token");
  location.hash = "";
  location.reload();
});
$("new-thread").addEventListener("click", newThread);
wirePrompt(api, () => state.threadId);
resetSession();
$("message").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    $("task").requestSubmit();
  }
});
$("task").addEventListener("submit", async (event) => {
  event.preventDefault();
  const message = $("message").value.trim();
  if (message === "") return;
  try {
    if (state.threadId === undefined) {
      const { thread } = await api("POST", "/v1/threads", { metadata: { title: message.slice(0, 60) } });
      openThread(thread.id);
    }
    const images = await chosenImages();
    await api("POST", `/v1/threads/${encodeURIComponent(state.threadId)}/runs`, {
      message,
      ...(images.length === 0 ? {} : { images }),
    });
    $("message").value = "";
    $("images").value = "";
  } catch (error) {
    showError(error.message);
  }
});
$("cancel").addEventListener("click", async () => {
  const run = state.activeRun;
  if (run === undefined) return;
  try {
    await api(
      "POST",
      `/v1/threads/${encodeURIComponent(state.threadId)}/runs/${encodeURIComponent(run.id)}/cancel`,
    );
  } catch (error) {
    // The run ended while the click was on its way: its own run-status event already says how.
    if (error.code === "run-finished") return;
    if (error.code === "thread-not-found") threadGone(state.threadId);
    else showError(error.message);
  }
});

if (state.token) signIn(state.token);
