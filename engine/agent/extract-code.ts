/**
 * Finding the model's code in its answer.
 *
 * Tool mode: the `moss` tool's arguments should be `{"code": "..."}`. Also accepted: the arguments JSON
 * stringified twice, the code itself wrapped in `{"code": ...}` again, a single other string property,
 * JSON with raw newlines inside the string, bare code instead of JSON, and markdown fences around the code (read by
 * engine/fenced-code.ts, the one fence reader: in code text only a leading fence counts).
 *
 * Prose mode (tools off): the **last complete** fenced block tagged `typescript`/`ts`/`tsx` wins, because
 * models that show a wrong version and then a corrected one put the answer last, and joining blocks would
 * declare `main` twice. Without such a block, the last complete `javascript`/`js`/untagged block that
 * declares `main` is taken. Without fences, an answer that contains `async function main(` is taken from the
 * start of the answer (when the answer starts with code) or from the `main` line, to the brace closing
 * `main`'s body. An opened but unclosed typescript fence is reported as `invalid` (the answer was probably
 * cut off by the token limit), never silently run or silently treated as a final answer.
 *
 * Text tool calls (both modes): servers that do not parse tool calls pass the model's own tool-call syntax
 * through as plain text. {@link extractTextToolCalls} reads the common shapes: Hermes/Qwen
 * `<tool_call>{…}</tool_call>`, Llama `<|python_tag|>{…}` and `<function=moss>{…}</function>`, Mistral
 * `[TOOL_CALLS][…]` and `[TOOL_CALLS]moss[ARGS]{…}`, `functools[…]`, DeepSeek's `<｜tool▁call▁begin｜>`, and a
 * bare JSON call (`{"name": "moss", "arguments": …}`, alone or in a ```json block), with the arguments as an
 * object or as a JSON string, under `arguments`, `parameters`, `args` or `input`.
 */

import { fencedBlocks, findFencedCode, STARTS_WITH_CODE } from "../fenced-code.ts";

/** Where a piece of code was found: a structured tool call, a tool call written as text, a fenced block, bare code. */
export type CodeSource = "tool" | "tool-text" | "fence" | "bare";

/** What was found in one answer or tool call. */
export type ExtractedCode =
  | { kind: "code"; code: string; source: CodeSource }
  | { kind: "none" }
  | { kind: "invalid"; reason: string };

const MAIN_FUNCTION = /^[ \t]*(?:export\s+)?(?:async\s+)?function\s+main\s*\(/m;
const MAX_UNWRAP_DEPTH = 4;
const UNCLOSED_BLOCK =
  "The answer opened a ```typescript block but never closed it (was it cut off?). Send the whole code again in one closed block.";

/** Extracts the code from the arguments text of a `moss` tool call. */
export function extractToolCode(argumentsText: string): ExtractedCode {
  const text = argumentsText.trim();
  if (text === "") {
    return {
      kind: "invalid",
      reason: 'The moss tool call had no arguments; call it with {"code": "<TypeScript>"}.',
    };
  }
  const code = unwrapCode(text, 0);
  if (code === undefined) {
    return {
      kind: "invalid",
      reason: 'The moss tool arguments were not {"code": "<TypeScript>"}: no code was found in them.',
    };
  }
  const cleaned = stripFences(code);
  if (cleaned.kind !== "code") return cleaned;
  return { kind: "code", code: cleaned.code, source: "tool" };
}

/** Extracts the code from a prose answer (tools off); `none` means the answer is final. */
export function extractProseCode(content: string): ExtractedCode {
  const found = findFencedCode(content, "prose");
  switch (found.kind) {
    case "code":
      return { kind: "code", code: found.code, source: "fence" };
    case "unclosed":
      return { kind: "invalid", reason: UNCLOSED_BLOCK };
    case "no-code":
      return { kind: "none" };
    case "unfenced":
      return bareMain(content);
  }
}

/** Removes markdown fences around code (the text of a tool call): see engine/fenced-code.ts for the rules. */
export function stripFences(code: string): ExtractedCode {
  const found = findFencedCode(code, "code");
  switch (found.kind) {
    case "code":
      return { kind: "code", code: found.code, source: "fence" };
    case "unclosed":
      return { kind: "invalid", reason: UNCLOSED_BLOCK };
    case "no-code":
      return { kind: "invalid", reason: "The code was an empty markdown block." };
    case "unfenced": {
      const text = code.trim();
      return text === ""
        ? { kind: "invalid", reason: "The code was empty." }
        : { kind: "code", code: text, source: "bare" };
    }
  }
}

function unwrapCode(text: string, depth: number): string | undefined {
  if (depth > MAX_UNWRAP_DEPTH) return text;
  const trimmed = text.trim();
  let value: unknown;
  try {
    value = JSON.parse(trimmed);
  } catch {
    const lenient = lenientCodeField(trimmed);
    if (lenient !== undefined) return unwrapCode(lenient, depth + 1);
    // Not JSON: plain code from a model that ignored the schema, unless it is broken JSON.
    return trimmed.startsWith("{") ? undefined : trimmed;
  }
  if (typeof value === "string") return unwrapCode(value, depth + 1);
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const record = value as Record<string, unknown>;
  const field = record.code;
  if (typeof field === "string") return unwrapCode(field, depth + 1);
  if (field !== null && typeof field === "object") return unwrapCode(JSON.stringify(field), depth + 1);
  const strings = Object.values(record).filter((entry): entry is string => typeof entry === "string");
  if (strings.length === 1) return unwrapCode(strings[0]!, depth + 1);
  return undefined;
}

/** `{"code": "..."}` where the string holds raw newlines or tabs, which JSON forbids but models write. */
function lenientCodeField(text: string): string | undefined {
  const match = /^\{\s*"code"\s*:\s*"([\s\S]*)"\s*,?\s*\}$/.exec(text);
  if (match === null) return undefined;
  const escaped = match[1]!.replace(/\r?\n/g, "\\n").replace(/\t/g, "\\t");
  try {
    return JSON.parse(`"${escaped}"`) as string;
  } catch {
    return undefined;
  }
}

function bareMain(content: string): ExtractedCode {
  const match = MAIN_FUNCTION.exec(content);
  if (match === null) return { kind: "none" };
  const end = endOfBody(content, match.index + match[0].length - 1);
  if (end === undefined) {
    return {
      kind: "invalid",
      reason: "The answer starts `async function main(` but its body is never closed (was it cut off?).",
    };
  }
  const trimmedStart = content.length - content.trimStart().length;
  const start = STARTS_WITH_CODE.test(content.trimStart()) ? trimmedStart : match.index;
  return { kind: "code", code: content.slice(start, end + 1).trim(), source: "bare" };
}

/** Index of the `}` closing the function whose parameter list opens at `openParen`. */
function endOfBody(text: string, openParen: number): number | undefined {
  const afterParams = skipBalanced(text, openParen, "(", ")");
  if (afterParams === undefined) return undefined;
  const openBrace = text.indexOf("{", afterParams);
  if (openBrace === -1) return undefined;
  return skipBalanced(text, openBrace, "{", "}");
}

/** Returns the index of the bracket matching the one at `start`, skipping strings, templates and comments. */
function skipBalanced(text: string, start: number, open: string, close: string): number | undefined {
  let depth = 0;
  const templateDepths: number[] = [];
  for (let index = start; index < text.length; index++) {
    const char = text[index]!;
    const next = text[index + 1];
    if (char === "/" && next === "/") {
      const end = text.indexOf("\n", index);
      if (end === -1) return undefined;
      index = end;
    } else if (char === "/" && next === "*") {
      const end = text.indexOf("*/", index + 2);
      if (end === -1) return undefined;
      index = end + 1;
    } else if (char === '"' || char === "'") {
      index = skipString(text, index, char);
    } else if (char === "`" || (char === "}" && templateDepths.at(-1) === depth)) {
      if (char === "}") templateDepths.pop();
      index = skipTemplate(text, index + 1);
      if (text[index] === "$") {
        templateDepths.push(depth);
        index += 1;
      }
    } else if (char === open) {
      depth += 1;
    } else if (char === close) {
      depth -= 1;
      if (depth === 0) return index;
    }
  }
  return undefined;
}

function skipString(text: string, start: number, quote: string): number {
  for (let index = start + 1; index < text.length; index++) {
    if (text[index] === "\\") index += 1;
    else if (text[index] === quote || text[index] === "\n") return index;
  }
  return text.length;
}

/** From inside a template literal, returns the index of its closing backtick or of the `$` of `${`. */
function skipTemplate(text: string, start: number): number {
  for (let index = start; index < text.length; index++) {
    if (text[index] === "\\") index += 1;
    else if (text[index] === "`") return index;
    else if (text[index] === "$" && text[index + 1] === "{") return index;
  }
  return text.length;
}

/**
 * The answer without the reasoning some models write before it (`<think>…</think>`, `<thinking>…</thinking>`,
 * `<reasoning>…</reasoning>`): drafts of code in there must not run. An unclosed block hides the rest.
 */
export function stripReasoning(content: string): string {
  return content.replace(/<(think|thinking|reasoning)>[\s\S]*?(?:<\/\1>|$)/gi, "").trim();
}

/** A tool call the model wrote as text in its answer (`arguments` is JSON text, like a structured call's). */
export interface TextToolCall {
  name: string;
  arguments: string;
}

/** What {@link extractTextToolCalls} found: the calls, or why a tool-call block could not be read. */
export type TextToolCalls =
  | { kind: "calls"; calls: TextToolCall[] }
  | { kind: "none" }
  | { kind: "invalid"; reason: string };

/** A tag that opens a tool-call payload, and what may close it (undefined: the payload runs to the end). */
interface CallMarker {
  label: string;
  open: RegExp;
  close: RegExp | undefined;
}

const END_OF_TURN = /<\|eom_id\|>|<\|eot_id\|>|<\|im_end\|>|<\|end\|>|<\/s>/;
const CALL_MARKERS: CallMarker[] = [
  { label: "<tool_call>", open: /<\|?tool_call\|?>/g, close: /<\|?\/tool_call\|?>|<\|tool_call_end\|>/ },
  { label: "<|python_tag|>", open: /<\|python_tag\|>/g, close: END_OF_TURN },
  { label: "[TOOL_CALLS]", open: /\[TOOL_CALLS\]/g, close: /\[\/TOOL_CALLS\]|<\/s>/ },
  { label: "functools", open: /functools(?=\[)/g, close: undefined },
  { label: "<｜tool▁call▁begin｜>", open: /<｜tool▁call▁begin｜>/g, close: /<｜tool▁call▁end｜>/ },
];
const FUNCTION_TAG = /<function[=\s]+"?([\w.-]+)"?\s*>([\s\S]*?)(?:<\/function>|$)/g;
const MISTRAL_ARGS = /^\s*([\w.-]+)\s*\[ARGS\]([\s\S]*)$/;
const DEEPSEEK_CALL = /^\s*function\s*<｜tool▁sep｜>\s*([\w.-]+)\s*([\s\S]*)$/;

/** Finds tool calls written as text in an answer (see the module comment for the shapes read). */
export function extractTextToolCalls(content: string): TextToolCalls {
  const calls: TextToolCall[] = [];
  const failures: string[] = [];
  for (const marker of CALL_MARKERS) {
    for (const payload of markedPayloads(content, marker)) {
      const found = readPayload(payload, marker.label);
      if (typeof found === "string") failures.push(found);
      else calls.push(...found);
    }
  }
  for (const match of content.matchAll(FUNCTION_TAG)) {
    calls.push({ name: match[1]!, arguments: argumentsText(match[2]!.trim()) });
  }
  if (calls.length === 0 && failures.length === 0) {
    const trimmed = content.trim();
    const candidates = [
      trimmed,
      ...fencedBlocks(content)
        .filter((block) => block.closed && ["json", ""].includes(block.language))
        .map((block) => block.body.trim()),
    ];
    for (const candidate of candidates) {
      if (!/^[[{]/.test(candidate)) continue;
      const value = parseJsonish(candidate);
      // A bare JSON answer is a call only when it carries arguments (a JSON final answer may have a "name").
      const found = value === undefined ? [] : toCalls(value).filter((call) => call.arguments !== "");
      if (found.length > 0) {
        calls.push(...found);
        break;
      }
    }
  }
  if (calls.length > 0) return { kind: "calls", calls };
  if (failures.length > 0) return { kind: "invalid", reason: failures[0]! };
  return { kind: "none" };
}

function markedPayloads(content: string, marker: CallMarker): string[] {
  const payloads: string[] = [];
  for (const match of content.matchAll(marker.open)) {
    const start = match.index + match[0].length;
    const rest = content.slice(start);
    const end = marker.close === undefined ? -1 : rest.search(marker.close);
    // An unclosed block runs to the next block of the same kind, or to the end of the answer.
    const next = rest.search(new RegExp(marker.open.source));
    const stop = end !== -1 ? end : next !== -1 ? next : rest.length;
    payloads.push(rest.slice(0, stop).trim());
  }
  return payloads;
}

/** Reads the calls of one tagged payload; a string is the reason it could not be read. */
function readPayload(payload: string, label: string): TextToolCall[] | string {
  const mistral = MISTRAL_ARGS.exec(payload);
  if (mistral !== null) return [{ name: mistral[1]!, arguments: argumentsText(mistral[2]!.trim()) }];
  const deepseek = DEEPSEEK_CALL.exec(payload);
  if (deepseek !== null) {
    const body = stripFences(deepseek[2]!);
    return [{ name: deepseek[1]!, arguments: body.kind === "code" ? argumentsText(body.code) : "" }];
  }
  const unfenced = stripFences(payload);
  const text = unfenced.kind === "code" ? unfenced.code : payload;
  if (text === "")
    return `The ${label} block was empty; write {"name": "moss", "arguments": {"code": "<TypeScript>"}} in it.`;
  const value = parseJsonish(text);
  if (value === undefined) {
    // `<|python_tag|>` may be followed by plain code (Llama's built-in code interpreter call).
    if (label === "<|python_tag|>" && !text.startsWith("{"))
      return [{ name: "moss", arguments: JSON.stringify({ code: text }) }];
    return `The ${label} block was not valid JSON; write {"name": "moss", "arguments": {"code": "<TypeScript>"}} in it, with the code as one JSON string.`;
  }
  const calls = toCalls(value);
  return calls.length > 0
    ? calls
    : `The ${label} block named no tool; write {"name": "moss", "arguments": {"code": "<TypeScript>"}} in it.`;
}

/** Normalises the JSON shapes models give one call, a list of calls, or `{tool_calls: [...]}`. */
function toCalls(value: unknown): TextToolCall[] {
  if (Array.isArray(value)) return value.flatMap((entry) => toCalls(entry));
  if (value === null || typeof value !== "object") return [];
  const record = value as Record<string, unknown>;
  if (Array.isArray(record.tool_calls)) return toCalls(record.tool_calls);
  if (record.function !== null && typeof record.function === "object") return toCalls(record.function);
  const name = [record.name, record.tool, record.tool_name, record.function, record.recipient_name].find(
    (entry): entry is string => typeof entry === "string" && entry !== "",
  );
  const args = [record.arguments, record.parameters, record.args, record.input].find(
    (entry) => entry !== undefined,
  );
  if (name !== undefined) {
    return [
      {
        name: name.replace(/^functions\./, ""),
        arguments: args === undefined ? "" : typeof args === "string" ? args : JSON.stringify(args),
      },
    ];
  }
  // `{"code": "..."}` alone: the moss tool's arguments without the envelope.
  if (typeof record.code === "string")
    return [{ name: "moss", arguments: JSON.stringify({ code: record.code }) }];
  return [];
}

/** The arguments of a call whose name was given by its tag: kept as JSON text when they are JSON, else as code. */
function argumentsText(text: string): string {
  const value = parseJsonish(text);
  if (value === undefined) return text;
  return typeof value === "string" ? value : JSON.stringify(value);
}

/**
 * JSON.parse, then again with the raw newlines, carriage returns and tabs inside strings escaped (JSON forbids
 * them; models write them in code). Undefined when the text is not JSON either way.
 */
export function parseJsonish(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // fall through to the lenient pass
  }
  let escaped = "";
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const char = text[index]!;
    if (inString && char === "\\") {
      escaped += char + (text[index + 1] ?? "");
      index += 1;
      continue;
    }
    if (char === '"') inString = !inString;
    if (inString && char === "\n") escaped += "\\n";
    else if (inString && char === "\r") escaped += "\\r";
    else if (inString && char === "\t") escaped += "\\t";
    else escaped += char;
  }
  try {
    return JSON.parse(escaped);
  } catch {
    return undefined;
  }
}
