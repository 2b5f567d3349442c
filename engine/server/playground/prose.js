// The model's prose as markdown: markdown-it with raw HTML off (model text never becomes markup of its own), links
// only to http, https and mailto (opened with rel="noopener noreferrer"), no images, and the program's fence left out
// where the program is shown as its own code card.
import MarkdownIt from "markdown-it";

const markdown = new MarkdownIt({ html: false, linkify: true, typographer: false });
// An image in model text would be a request the page makes on the model's say (the CSP blocks it anyway).
markdown.disable("image");
markdown.validateLink = (url) => /^(https?:|mailto:)/i.test(url.trim());

/** Markup markdown-it writes from text with html off; anything else found in its output is shown as text. */
const ALLOWED = new Set(
  "P EM STRONG S DEL A CODE PRE UL OL LI H1 H2 H3 H4 H5 H6 BLOCKQUOTE HR BR TABLE THEAD TBODY TR TH TD".split(
    " ",
  ),
);

/** Languages of a fence the engine may take the program from (engine/runtime/fenced-code.ts). */
const TYPESCRIPT = new Set(["typescript", "ts", "tsx"]);
const OTHER_CODE = new Set(["javascript", "js", "jsx", ""]);

/**
 * The prose of `text` as DOM nodes. When `program` (the code the step ran) is given, the fence holding it is left
 * out: by the engine's rule the last closed typescript block runs (else the last js/untagged one declaring main), so
 * the last fence of those languages whose body is the program is the one shown as the code card.
 */
export function renderProse(text, program) {
  const tokens = markdown.parse(text, {});
  if (program !== undefined) {
    const code = program.trim();
    const index = tokens.findLastIndex(
      (token) =>
        token.type === "fence" &&
        (TYPESCRIPT.has(language(token)) || OTHER_CODE.has(language(token))) &&
        token.content.trim() === code,
    );
    if (index !== -1) tokens.splice(index, 1);
  }
  const template = document.createElement("template");
  // markdown-it with html off escapes every character of the model's text it writes; checked below all the same.
  template.innerHTML = markdown.renderer.render(tokens, markdown.options, {});
  for (const element of [...template.content.querySelectorAll("*")]) {
    if (!ALLOWED.has(element.tagName)) {
      element.replaceWith(document.createTextNode(element.textContent ?? ""));
      continue;
    }
    for (const attribute of [...element.attributes]) {
      const keep =
        (element.tagName === "A" && attribute.name === "href") ||
        (element.tagName === "CODE" && attribute.name === "class") ||
        (["TH", "TD"].includes(element.tagName) && attribute.name === "style");
      if (!keep) element.removeAttribute(attribute.name);
    }
    if (element.tagName === "A") {
      if (!/^(https?:|mailto:)/i.test(element.getAttribute("href") ?? "")) element.removeAttribute("href");
      element.setAttribute("rel", "noopener noreferrer");
      element.setAttribute("target", "_blank");
    }
  }
  return template.content;
}

function language(token) {
  return (token.info ?? "").trim().split(/\s+/)[0].toLowerCase();
}
