// The model's program as code: highlighted by highlight.js (core and TypeScript only), with line numbers in a gutter
// that screen readers and copying skip.
import hljs from "highlight.js/lib/core";
import typescript from "highlight.js/lib/languages/typescript";

hljs.registerLanguage("typescript", typescript);

/** highlight.js's class names for a scope (its own rule: `title.function` is `hljs-title function_`). */
function scopeClass(scope) {
  if (scope.startsWith("language:")) return scope.replace("language:", "language-");
  const [first, ...rest] = scope.split(".");
  return [`hljs-${first}`, ...rest.map((piece, index) => `${piece}${"_".repeat(index + 1)}`)].join(" ");
}

/**
 * `code` highlighted, as DOM nodes built from highlight.js's token tree (`_emitter.rootNode` of 11.x: nodes of
 * `{ scope?, children }` and strings): text nodes and `<span class>` only, no HTML is parsed. Plain text when the
 * tree is not there.
 */
function highlighted(code) {
  const root = hljs.highlight(code, { language: "typescript", ignoreIllegals: true })._emitter?.rootNode;
  if (root === undefined || !Array.isArray(root.children)) return document.createTextNode(code);
  const build = (node) => {
    if (typeof node === "string") return document.createTextNode(node);
    const parent =
      node.scope === undefined ? document.createDocumentFragment() : document.createElement("span");
    if (node.scope !== undefined) parent.className = scopeClass(node.scope);
    for (const child of node.children ?? []) parent.append(build(child));
    return parent;
  };
  const built = build(root);
  // The tree holds every character of the code: anything else shows the code as it is.
  return built.textContent === code ? built : document.createTextNode(code);
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
