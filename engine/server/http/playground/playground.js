// The playground page of `moss serve`: plain DOM, every text the model controls goes through textContent.
import { createParser } from "eventsource-parser";

const $ = (id) => document.getElementById(id);
const state = {
  token: sessionStorage.getItem("moss.token") ?? "",
  threadId: undefined,
  stream: undefined,
  runs: new Map(),
};

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

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
}

async function listThreads() {
  const { threads } = await api("GET", "/v1/threads?limit=100");
  const list = $("threads");
  list.replaceChildren();
  for (const thread of threads) {
    const button = element("button", "thread", thread.metadata?.title ?? thread.id);
    button.type = "button";
    button.dataset.threadId = thread.id;
    button.setAttribute("aria-current", String(thread.id === state.threadId));
    button.addEventListener("click", () => openThread(thread.id));
    list.append(button);
  }
}

function openThread(threadId) {
  state.stream?.abort();
  state.threadId = threadId;
  state.runs = new Map();
  state.text = undefined;
  history.replaceState(null, "", `#thread=${encodeURIComponent(threadId)}`);
  for (const button of $("threads").children) {
    button.setAttribute("aria-current", String(button.dataset.threadId === threadId));
  }
  $("log").replaceChildren();
  setRun(undefined);
  follow(threadId);
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
  for (const button of [...state.runs.values()].flat()) button.disabled = true;
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

function render(type, data) {
  switch (type) {
    case "message":
      if (data.message.role === "user" && data.message.metadata?.kind === "task") {
        const item = element("div", "item user", data.message.content);
        append(item);
      } else if (data.message.role === "assistant") {
        const content = data.message.content ?? "";
        if (state.text !== undefined) state.text.body.textContent = content;
        else if (content.trim() !== "") append(textItem(content).item);
        state.text = undefined;
      }
      break;
    case "text-delta":
      state.text ??= textItem("");
      if (!state.text.item.isConnected) append(state.text.item);
      state.text.body.textContent += data.delta;
      break;
    case "code": {
      const item = element("div", "item code");
      item.append(element("div", "label", "code"), element("pre", "", data.code));
      append(item);
      break;
    }
    case "execution": {
      const execution = data.execution;
      const item = element("div", `item execution${execution.ok ? "" : " failed"}`);
      item.append(element("div", "label", execution.ok ? "output" : execution.pending ? "paused" : "failed"));
      if (execution.stdout) item.append(element("pre", "stdout", execution.stdout));
      if (execution.pending) item.append(element("div", "", "The code waits for a person's answer below."));
      if (execution.error)
        item.append(
          element("pre", "error", `${execution.error.name ?? "Error"}: ${execution.error.message}`),
        );
      append(item);
      break;
    }
    case "approval-request":
      append(requestCard(data, "approval"));
      break;
    case "clarification-request":
      append(requestCard(data, "question"));
      break;
    case "error":
      showError(data.message);
      break;
    case "run-end":
      if (data.stopReason === "answer" && data.answer !== undefined) {
        const last = $("log").lastElementChild;
        // The model's last prose is the answer: mark it as such rather than showing it twice.
        if (last?.classList.contains("text") && last.lastElementChild?.textContent === data.answer)
          last.remove();
        const item = element("div", "item answer");
        item.append(element("div", "label", "answer"), element("div", "", data.answer));
        append(item);
      } else if (data.stopReason !== "pending") {
        showError(`The run stopped: ${data.reason}`);
      }
      break;
    case "run-status": {
      setRun(data.run);
      if (data.status !== "pending") {
        for (const button of state.runs.get(data.run.id) ?? []) button.disabled = true;
      }
      append(element("div", "status", `run ${data.status}`));
      if (data.status === "queued") listThreads().catch(() => {});
      break;
    }
  }
}

function textItem(content) {
  const item = element("div", "item text");
  const body = element("div", "", content);
  item.append(element("div", "label", "assistant"), body);
  return { item, body };
}

function requestCard(data, kind) {
  const request = data.request;
  const item = element("div", "item clarification");
  item.dataset.requestId = request.id;
  const buttons = [];
  const answer = async (value, clicked) => {
    for (const button of buttons) button.disabled = true;
    clicked?.setAttribute("aria-pressed", "true");
    try {
      await api(
        "POST",
        `/v1/threads/${encodeURIComponent(state.threadId)}/answers`,
        // The answer is for this request of this run: the server applies it to nothing else.
        { runId: data.runId, answers: { [request.id]: value } },
        { "idempotency-key": `${data.runId}:${request.id}` },
      );
    } catch (error) {
      for (const button of buttons) button.disabled = false;
      showError(error.message);
    }
  };
  const choice = (label, value) => {
    const button = element("button", "choice", label);
    button.type = "button";
    button.addEventListener("click", () => answer(value, button));
    buttons.push(button);
    return button;
  };
  if (kind === "approval") {
    const name = request.service === undefined ? request.member : `${request.service}.${request.member}`;
    // The engine's words for the call (its one describer, stored with the event), as the client and AG-UI show.
    item.append(element("div", "label", "approval needed"), element("div", "call", data.description ?? name));
    item.append(element("pre", "args", JSON.stringify(request.args, null, 2)));
    item.append(
      choice("Approve", { approved: true }),
      choice("Deny", { approved: false, reason: "denied in the playground" }),
    );
  } else {
    item.append(element("div", "label", "question"), element("div", "question", request.question));
    for (const text of request.choices ?? []) item.append(choice(text, { answer: text }));
    if (!request.choices?.length) {
      const input = element("input", "free-answer");
      const send = element("button", "choice", "Answer");
      send.type = "button";
      send.addEventListener("click", () => answer({ answer: input.value }, send));
      buttons.push(send);
      item.append(input, send);
    }
  }
  const list = state.runs.get(data.runId) ?? [];
  list.push(...buttons);
  state.runs.set(data.runId, list);
  return item;
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
$("new-thread").addEventListener("click", () => {
  state.stream?.abort();
  state.threadId = undefined;
  history.replaceState(null, "", location.pathname);
  $("log").replaceChildren();
  setRun(undefined);
  $("message").focus();
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
    await api("POST", `/v1/threads/${encodeURIComponent(state.threadId)}/runs`, { message });
    $("message").value = "";
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
