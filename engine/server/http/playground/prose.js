// The model's prose as markdown: markdown-it parses it with raw HTML off, and the page builds the DOM from its tokens
// itself (text nodes and a fixed set of elements; no HTML is parsed, so model text never becomes markup of its own).
// Links only to http, https and mailto, opened with rel="noopener noreferrer"; no images; the program's fence left
// out where the program is shown as its own code card.
import MarkdownIt from "markdown-it";

const markdown = new MarkdownIt({ html: false, linkify: true, typographer: false });
// An image in model text would be a request the page makes on the model's say (the CSP blocks it anyway).
markdown.disable("image");
const SAFE_LINK = /^(https?:|mailto:)/i;
markdown.validateLink = (url) => SAFE_LINK.test(url.trim());

/** The elements a token may open: markdown-it's own tags for CommonMark, tables and strikethrough. */
const ALLOWED = new Set(
  "p em strong s del a code pre ul ol li h1 h2 h3 h4 h5 h6 blockquote hr br table thead tbody tr th td".split(
    " ",
  ),
);

/** Languages of a fence the engine may take the program from (engine/fenced-code.ts). */
const PROGRAM_LANGUAGES = new Set(["typescript", "ts", "tsx", "javascript", "js", "jsx", ""]);

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
        token.type === "fence" && PROGRAM_LANGUAGES.has(language(token)) && token.content.trim() === code,
    );
    if (index !== -1) tokens.splice(index, 1);
  }
  const root = document.createDocumentFragment();
  build(tokens, root);
  return root;
}

/** Appends `tokens` to `root`: opening tokens push an element, closing ones pop it, leaves become text. */
function build(tokens, root) {
  const stack = [root];
  const top = () => stack.at(-1);
  for (const token of tokens) {
    if (token.nesting === 1) {
      const node = open(token);
      top().append(node);
      stack.push(node);
    } else if (token.nesting === -1) {
      if (stack.length > 1) stack.pop();
    } else if (token.type === "inline") {
      build(token.children ?? [], top());
    } else if (token.type === "fence" || token.type === "code_block") {
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      code.textContent = token.content;
      pre.append(code);
      top().append(pre);
    } else if (token.type === "code_inline") {
      const code = document.createElement("code");
      code.textContent = token.content;
      top().append(code);
    } else if (token.type === "hardbreak") {
      top().append(document.createElement("br"));
    } else if (token.type === "softbreak") {
      top().append(document.createTextNode("\n"));
    } else if (token.type === "hr") {
      top().append(document.createElement("hr"));
    } else {
      // text, and anything else markdown-it may emit (html_* cannot appear with html off): its text, as text.
      top().append(document.createTextNode(token.content ?? ""));
    }
  }
}

/** The element an opening token stands for (a `<span>` for a tag outside the allowed set). */
function open(token) {
  const tag = ALLOWED.has(token.tag) ? token.tag : "span";
  const node = document.createElement(tag);
  if (tag === "a") {
    const href = (token.attrGet("href") ?? "").trim();
    if (SAFE_LINK.test(href)) node.setAttribute("href", href);
    node.setAttribute("rel", "noopener noreferrer");
    node.setAttribute("target", "_blank");
  }
  if (tag === "ol") {
    const start = Number(token.attrGet("start"));
    if (Number.isInteger(start) && start > 0) node.setAttribute("start", String(start));
  }
  return node;
}

function language(token) {
  return (token.info ?? "").trim().split(/\s+/)[0].toLowerCase();
}
