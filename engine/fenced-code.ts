/**
 * The one reader of markdown fences around model code, used by the agent (answers, tool arguments) and by
 * `execute()`/`typecheck()`.
 *
 * - In prose (a model's answer), fenced blocks are found anywhere.
 * - In text that is already code (tool arguments, `execute()` input), fences count only when the text begins with
 *   one (or begins with a line of prose before one, as models write "Here it is:" in tool arguments); code that
 *   begins as code is taken as it is, so a fence inside one of its string literals never replaces the program.
 * - Inside a TypeScript/JavaScript block, a fence line that falls inside a template literal or a block comment of
 *   that code does not close the block.
 * - When several blocks qualify, the **last complete** `typescript`/`ts`/`tsx` block wins (models that show a wrong
 *   version and then a corrected one put the answer last, and joining blocks would declare `main` twice); without
 *   one, the last complete `javascript`/`js`/untagged block that declares `main`.
 */

/** One fenced block of a markdown text. */
export interface FencedBlock {
  /** The info string's first word, lower-cased ("" when untagged). */
  language: string;
  body: string;
  closed: boolean;
}

/** What {@link findFencedCode} found. */
export type FencedCode =
  /** The code of the chosen block. */
  | { kind: "code"; code: string }
  /** The text has no fence to strip: in code, the text is the code; in prose, there is no fenced block. */
  | { kind: "unfenced" }
  /** A code block was opened and never closed (the answer was probably cut off): its body so far. */
  | { kind: "unclosed"; code: string }
  /** Fenced blocks, none holding code. */
  | { kind: "no-code" };

const TYPESCRIPT_LANGUAGES = new Set(["typescript", "ts", "tsx"]);
const SCRIPT_LANGUAGES = new Set(["typescript", "ts", "tsx", "javascript", "js", "jsx"]);
const OTHER_CODE_LANGUAGES = new Set(["javascript", "js", "jsx", ""]);
const DECLARES_MAIN = /\b(?:function\s+main\s*\(|(?:const|let|var)\s+main\s*=)/;
const OPENING_FENCE = /^\s*(`{3,}|~{3,})\s*([\w+-]*)[^`]*$/;
/** A first line that is code, not prose (a fence after it is then part of the code). */
export const STARTS_WITH_CODE =
  /^(?:export\s|async\s|function\s|const\s|let\s|var\s|import\s|interface\s|type\s|class\s|enum\s|\/\/|\/\*)/;

/**
 * Finds the code in `text`: `"prose"` looks for fences anywhere, `"code"` only when the text begins with one (or
 * with prose before one); see the module comment for the rules.
 */
export function findFencedCode(text: string, where: "prose" | "code"): FencedCode {
  if (where === "code" && !fencesApply(text)) return { kind: "unfenced" };
  const blocks = fencedBlocks(text);
  const closed = blocks.filter((block) => block.closed);
  const chosen =
    closed.filter((block) => TYPESCRIPT_LANGUAGES.has(block.language)).at(-1) ??
    closed
      .filter((block) => OTHER_CODE_LANGUAGES.has(block.language) && DECLARES_MAIN.test(block.body))
      .at(-1);
  if (chosen !== undefined && chosen.body.trim() !== "") return { kind: "code", code: chosen.body.trim() };
  const unclosed = blocks.find((block) => !block.closed && isCodeBlock(block));
  if (unclosed !== undefined) return { kind: "unclosed", code: unclosed.body.trim() };
  if (where === "code") {
    // Text that is code by position: a block in another language (or untagged) is still the code meant to run.
    const any = closed.filter((block) => block.body.trim() !== "").at(-1);
    if (any !== undefined) return { kind: "code", code: any.body.trim() };
    const open = blocks.find((block) => !block.closed && block.body.trim() !== "");
    if (open !== undefined) return { kind: "unclosed", code: open.body.trim() };
  }
  return blocks.length > 0 ? { kind: "no-code" } : { kind: "unfenced" };
}

/**
 * Whether fences in code text are markdown: the text begins with a fence, or with a line of prose before one.
 * A fence line inside a template literal or comment of the text before it never counts.
 */
function fencesApply(text: string): boolean {
  const lines = text.trimStart().split(/\r?\n/);
  const first = lines.findIndex((line) => OPENING_FENCE.test(line));
  if (first === -1) return false;
  if (first === 0) return true;
  const before = lines.slice(0, first).join("\n");
  return !STARTS_WITH_CODE.test(before) && !endsInsideLiteral(before);
}

function isCodeBlock(block: FencedBlock): boolean {
  return (
    TYPESCRIPT_LANGUAGES.has(block.language) ||
    (OTHER_CODE_LANGUAGES.has(block.language) && DECLARES_MAIN.test(block.body))
  );
}

/** The fenced blocks of a markdown text, in order; a block left open runs to the end of the text. */
export function fencedBlocks(text: string): FencedBlock[] {
  const blocks: FencedBlock[] = [];
  let open: { fence: string; language: string; body: string[] } | undefined;
  for (const line of text.split(/\r?\n/)) {
    if (open === undefined) {
      const start = OPENING_FENCE.exec(line);
      if (start !== null) open = { fence: start[1]!, language: start[2]!.toLowerCase(), body: [] };
      continue;
    }
    const trimmed = line.trim();
    const closes =
      trimmed.length >= open.fence.length &&
      trimmed === open.fence[0]!.repeat(trimmed.length) &&
      !(holdsCode(open) && endsInsideLiteral(open.body.join("\n")));
    if (closes) {
      blocks.push({ language: open.language, body: open.body.join("\n"), closed: true });
      open = undefined;
    } else {
      open.body.push(line);
    }
  }
  if (open !== undefined) blocks.push({ language: open.language, body: open.body.join("\n"), closed: false });
  return blocks;
}

/** A block whose body is read as code (so a fence line inside one of its literals does not close it). */
function holdsCode(open: { language: string; body: string[] }): boolean {
  if (SCRIPT_LANGUAGES.has(open.language)) return true;
  return open.language === "" && DECLARES_MAIN.test(open.body.join("\n"));
}

type LexFrame = { kind: "code"; braces: number } | { kind: "template" };

/**
 * Whether the end of `code` lies inside a template literal or a block comment (the only places a line of
 * TypeScript can hold a line that looks like a fence). Quoted strings end at a line break; regex literals are not
 * told apart from division.
 */
export function endsInsideLiteral(code: string): boolean {
  const stack: LexFrame[] = [{ kind: "code", braces: 0 }];
  for (let index = 0; index < code.length; index++) {
    const char = code[index]!;
    const next = code[index + 1];
    const top = stack.at(-1)!;
    if (top.kind === "template") {
      if (char === "\\") index += 1;
      else if (char === "`") stack.pop();
      else if (char === "$" && next === "{") {
        stack.push({ kind: "code", braces: 0 });
        index += 1;
      }
      continue;
    }
    if (char === "/" && next === "/") {
      const end = code.indexOf("\n", index);
      if (end === -1) return false;
      index = end;
    } else if (char === "/" && next === "*") {
      const end = code.indexOf("*/", index + 2);
      if (end === -1) return true;
      index = end + 1;
    } else if (char === '"' || char === "'") {
      index = endOfQuoted(code, index, char);
    } else if (char === "`") {
      stack.push({ kind: "template" });
    } else if (char === "{") {
      top.braces += 1;
    } else if (char === "}") {
      if (top.braces === 0 && stack.length > 1) stack.pop();
      else top.braces = Math.max(0, top.braces - 1);
    }
  }
  return stack.some((frame) => frame.kind === "template");
}

function endOfQuoted(text: string, start: number, quote: string): number {
  for (let index = start + 1; index < text.length; index++) {
    if (text[index] === "\\") index += 1;
    else if (text[index] === quote || text[index] === "\n") return index;
  }
  return text.length;
}

/**
 * The code to type-check and run from `execute()`/`typecheck()` input: the chosen block's code when the text is
 * fenced, the body of a block left open, else the text as it is.
 */
export function stripFences(text: string): string {
  const found = findFencedCode(text, "code");
  switch (found.kind) {
    case "code":
    case "unclosed":
      return found.code;
    case "no-code":
      return "";
    case "unfenced":
      return text;
  }
}
