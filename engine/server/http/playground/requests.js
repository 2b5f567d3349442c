// What a paused run asks a person: an approval of one host call (the call in words, its line of code, Approve or
// Deny with an optional reason) or a `moss.ask` question (its choices as buttons, else a text box); the decision is
// shown on the card once it is made, and as the thread recorded it (its `answer` event: who, when, the reason).
import { button, element, labelledInput } from "./dom.js";
import { pretty } from "./outcome.js";

const WHY = {
  tag: "The module marks this call as needing a person's approval (@approval).",
  policy: "The server's call policy asks a person before this call runs.",
  "in-doubt":
    "This call had started when the worker running it stopped: it may have run already. Approve runs it again; Deny makes it fail in the code.",
};

/** A value as an argument is written in code: strings quoted, objects as compact JSON. */
function argument(value) {
  if (value === undefined) return "undefined";
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * The call in words: `todos.remove(id: 3)` when the request names the parameters (`parameters`, in declaration
 * order, as the module declares them), else positional `todos.remove(3)`.
 */
export function callInWords(request) {
  const name = request.service === undefined ? request.member : `${request.service}.${request.member}`;
  const names = Array.isArray(request.parameters) ? request.parameters : [];
  const args = (request.args ?? []).map((value, index) =>
    names[index] === undefined ? argument(value) : `${names[index]}: ${argument(value)}`,
  );
  return `${name}(${args.join(", ")})`;
}

/** When an event says a thing happened (ISO time), as the person's clock reads it. */
function when(at) {
  const date = new Date(at);
  return Number.isNaN(date.getTime()) ? String(at ?? "") : date.toLocaleString();
}

/**
 * A decision as the thread recorded it (an `answer` event): "Denied by alice at 07/12/2026, 03:12:04: too much"; a
 * question's "Answered "blue" by alice at …".
 */
export function decisionWords(event) {
  const who = event.by?.name ?? event.by?.tenant ?? "someone";
  const stamp = `by ${who} at ${when(event.at)}`;
  if (event.kind === "clarification") return `Answered "${event.answer ?? ""}" ${stamp}`;
  if (event.approved) return `Approved ${stamp}`;
  return `Denied ${stamp}${event.reason ? `: ${event.reason}` : ""}`;
}

/** What the module says of the member (its doc comment) and what each host-object argument is. */
function callDetails(request) {
  const parts = [];
  if (typeof request.doc === "string" && request.doc !== "") {
    parts.push(element("h4", "", "what the module says of it"), element("pre", "doc", request.doc));
  }
  const handles = Object.entries(request.handles ?? {});
  if (handles.length > 0) {
    const list = element("ul", "handles");
    list.setAttribute("aria-label", "host objects in the arguments");
    const names = Array.isArray(request.parameters) ? request.parameters : [];
    for (const [index, description] of handles) {
      const name = names[Number(index)] ?? `argument ${Number(index) + 1}`;
      list.append(element("li", "meta", `${name} is ${description}`));
    }
    parts.push(list);
  }
  return parts;
}

/**
 * The card of one request event. `answer(value)` posts the answer and resolves when the server took it (it throws
 * with the server's message otherwise). Returns the card and its controls, which the page turns off once the run
 * moved on; `decided(text)` writes the decision on the card, `record(text)` the thread's record of it (kept).
 */
export function requestCard(data, answer) {
  const request = data.request;
  const approval = request.kind === "approval";
  const item = element("section", "item clarification");
  item.dataset.requestId = request.id;
  const controls = [];
  const decision = element("p", "decision");
  decision.setAttribute("role", "status");
  decision.hidden = true;
  const decided = (text) => {
    decision.textContent = text;
    decision.hidden = false;
  };
  // Once the thread's record of the decision came, it stays what the card says.
  let recorded = false;
  const record = (text) => {
    recorded = true;
    for (const control of controls) control.disabled = true;
    decided(text);
  };
  const send = async (value, clicked, words) => {
    for (const control of controls) control.disabled = true;
    clicked?.setAttribute("aria-pressed", "true");
    try {
      await answer(value);
      if (!recorded) decided(`${words} at ${new Date().toLocaleTimeString()}`);
    } catch (error) {
      for (const control of controls) control.disabled = false;
      clicked?.removeAttribute("aria-pressed");
      decided(`Not sent: ${error.message}`);
    }
  };
  if (approval) {
    const words = callInWords(request);
    item.setAttribute("aria-label", `Approval needed: ${words}`);
    item.append(element("div", "label", "approval needed"));
    item.append(element("h3", "call-words", words));
    // The engine's words for the call (its one describer, stored with the event), as the client and AG-UI show.
    item.append(element("div", "call", data.description ?? words));
    if (request.target) item.append(element("p", "meta", `acts on ${request.target}`));
    item.append(...callDetails(request));
    if (WHY[request.reason]) item.append(element("p", "meta", WHY[request.reason]));
    if (request.code) {
      item.append(
        element("h4", "", request.line === undefined ? "the code" : `line ${request.line} of the code`),
      );
      item.append(element("pre", "frame", request.code));
    } else if (request.lineUnknown) {
      item.append(element("p", "meta", request.lineUnknown));
    }
    item.append(element("h4", "", "arguments"), element("pre", "args", pretty(request.args)));
    const { label: reasonLabel, input: reason } = labelledInput(
      `reason-${request.id}`,
      "Reason if you deny (optional)",
      "reason",
      500,
    );
    const approve = button("Approve", "choice approve", `Approve ${words}`);
    const deny = button("Deny", "choice deny", `Deny ${words}`);
    approve.addEventListener("click", () => send({ approved: true }, approve, "Approved"));
    deny.addEventListener("click", () => {
      const why = reason.value.trim();
      send(
        why === "" ? { approved: false } : { approved: false, reason: why },
        deny,
        why === "" ? "Denied" : `Denied (${why})`,
      );
    });
    reason.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        deny.click();
      }
    });
    controls.push(reason, approve, deny);
    const row = element("div", "actions");
    row.append(approve, deny);
    item.append(reasonLabel, reason, row, decision);
  } else {
    item.setAttribute("aria-label", `Question: ${request.question}`);
    item.append(element("div", "label", "question"), element("h3", "question", request.question));
    const row = element("div", "actions");
    for (const text of request.choices ?? []) {
      const choice = button(text, "choice");
      choice.addEventListener("click", () => send({ answer: text }, choice, `Answered "${text}"`));
      controls.push(choice);
      row.append(choice);
    }
    if (!request.choices?.length) {
      const { label, input } = labelledInput(`answer-${request.id}`, "Your answer", "free-answer");
      const submit = button("Answer", "choice");
      const go = () => send({ answer: input.value }, submit, `Answered "${input.value}"`);
      submit.addEventListener("click", go);
      input.addEventListener("keydown", (event) => {
        if (event.key === "Enter") {
          event.preventDefault();
          go();
        }
      });
      controls.push(input, submit);
      row.append(submit);
      item.append(label, input);
    }
    item.append(row, decision);
  }
  return { item, controls, decided, record, decision };
}
