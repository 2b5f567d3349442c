// The model's program as code: highlighted by highlight.js (core and TypeScript only), with line numbers in a gutter
// that screen readers and copying skip.
import hljs from "highlight.js/lib/core";
import typescript from "highlight.js/lib/languages/typescript";

hljs.registerLanguage("typescript", typescript);

/**
 * `code` highlighted, as DOM nodes. highlight.js escapes the text it writes and adds only `<span class="hljs-…">`;
 * output with anything else falls back to the plain text.
 */
function highlighted(code) {
  const template = document.createElement("template");
  template.innerHTML = hljs.highlight(code, { language: "typescript", ignoreIllegals: true }).value;
  const clean = [...template.content.querySelectorAll("*")].every(
    (element) =>
      element.tagName === "SPAN" &&
      [...element.attributes].every(
        (attribute) => attribute.name === "class" && /^(hljs-[\w-]+|_*)( [\w-]+_*)*$/.test(attribute.value),
      ),
  );
  return clean ? template.content : document.createTextNode(code);
}

/**
 * A code view: line numbers (from `firstLine`, 1 by default), the code highlighted, and `mark` (a line number) set
 * apart. Lines never wrap; the view scrolls sideways with the gutter kept in place.
 */
export function codeView(code, { firstLine = 1, mark, label } = {}) {
  const view = document.createElement("div");
  view.className = "code-view";
  const lines = code.split("\n");
  const gutter = document.createElement("div");
  gutter.className = "gutter";
  gutter.setAttribute("aria-hidden", "true");
  gutter.textContent = lines.map((_, index) => String(firstLine + index)).join("\n");
  const pre = document.createElement("pre");
  if (label) {
    pre.setAttribute("aria-label", label);
    pre.tabIndex = 0;
  }
  const body = document.createElement("code");
  body.className = "hljs language-typescript";
  body.append(highlighted(code));
  pre.append(body);
  if (mark !== undefined && mark >= firstLine && mark < firstLine + lines.length) {
    const band = document.createElement("div");
    band.className = "mark";
    band.style.top = `calc(${mark - firstLine} * var(--code-line) + var(--code-pad))`;
    view.append(band);
  }
  view.append(gutter, pre);
  return view;
}
