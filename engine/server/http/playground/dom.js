// The studio's one way to make DOM: text goes in through textContent only.

/** A `tag` element with `className` and, when given, `text` as its text. */
export function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A button of `type="button"` with its text, and `label` as its accessible name when the text is not enough. */
export function button(text, className, label) {
  const node = element("button", className, text);
  node.type = "button";
  if (label) node.setAttribute("aria-label", label);
  return node;
}

/**
 * A one-line text input with its visible `<label>` (its accessible name), tied by `id`; autocomplete off. `maxLength`
 * when given. Returns both: callers place them.
 */
export function labelledInput(id, labelText, className, maxLength) {
  const label = element("label", "reason-label", labelText);
  label.htmlFor = id;
  const input = element("input", className);
  input.id = id;
  input.type = "text";
  if (maxLength !== undefined) input.maxLength = maxLength;
  input.autocomplete = "off";
  return { label, input };
}
