import { afterAll, describe, expect, test } from "vitest";
import {
  extractProseCode,
  extractToolCode,
  stripFences as stripToolFences,
} from "../../engine/agent/extract-code.ts";
import { endsInsideLiteral, fencedBlocks, findFencedCode, stripFences } from "../../engine/fenced-code.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { compileFromText } from "../helpers/compile-from-text.ts";

const MAIN = "async function main(moss: Moss) {\n  return 1;\n}";
const FENCE = "```";
/** Model code whose template literal holds a whole markdown block (backticks would end the literal: tildes). */
const MARKDOWN_IN_LITERAL = [
  "async function main(moss: Moss) {",
  "  const readme = `# Usage",
  "~~~ts",
  "const x = 1;",
  "~~~",
  "`;",
  "  return readme.length;",
  "}",
].join("\n");

describe("one fence reader for the agent and execute()", () => {
  test("``` and ~~~ fences of any length are read alike, in prose and in code", () => {
    for (const fence of ["```", "~~~", "````", "~~~~~"]) {
      const fenced = `${fence}typescript\n${MAIN}\n${fence}`;
      expect(findFencedCode(`Here:\n${fenced}\nDone.`, "prose")).toEqual({ kind: "code", code: MAIN });
      expect(stripFences(fenced)).toBe(MAIN);
      expect(stripToolFences(fenced)).toMatchObject({ kind: "code", code: MAIN });
    }
  });

  test("two blocks: the last typescript block, for both callers (never joined)", () => {
    const first = "async function main(moss: Moss) {\n  return 0;\n}";
    const two = `${FENCE}ts\n${first}\n${FENCE}\nOops, corrected:\n${FENCE}ts\n${MAIN}\n${FENCE}`;
    expect(stripFences(two)).toBe(MAIN);
    expect(stripToolFences(two)).toMatchObject({ kind: "code", code: MAIN });
    expect(extractProseCode(two)).toMatchObject({ kind: "code", code: MAIN });
  });

  test("code that begins as code is kept whole: a fence inside its string literal never replaces it", () => {
    expect(findFencedCode(MARKDOWN_IN_LITERAL, "code")).toEqual({ kind: "unfenced" });
    expect(stripFences(MARKDOWN_IN_LITERAL)).toBe(MARKDOWN_IN_LITERAL);
    expect(extractToolCode(JSON.stringify({ code: MARKDOWN_IN_LITERAL }))).toEqual({
      kind: "code",
      code: MARKDOWN_IN_LITERAL,
      source: "tool",
    });
    // Statements that do not look like code at first sight are still code when the fence is inside a literal.
    const statement = "console.log(`\n~~~ts\nx\n~~~\n`);";
    expect(stripFences(statement)).toBe(statement);
  });

  test("a fenced program whose template literal holds a fence is read whole, in code and in prose", () => {
    const fenced = `~~~typescript\n${MARKDOWN_IN_LITERAL}\n~~~`;
    expect(stripFences(fenced)).toBe(MARKDOWN_IN_LITERAL);
    expect(extractProseCode(`Let me write the readme.\n${fenced}\n`)).toMatchObject({
      kind: "code",
      code: MARKDOWN_IN_LITERAL,
    });
    const inComment = `async function main(moss: Moss) {\n  /*\n${FENCE}\n  */\n  return 1;\n}`;
    expect(extractProseCode(`${FENCE}ts\n${inComment}\n${FENCE}`)).toMatchObject({ code: inComment });
  });

  test("in prose a fence anywhere counts; in code only a leading one (or one after a line of prose)", () => {
    expect(findFencedCode(`Sure.\n\n${FENCE}ts\n${MAIN}\n${FENCE}`, "prose")).toMatchObject({ code: MAIN });
    expect(findFencedCode(`Here it is:\n${FENCE}ts\n${MAIN}\n${FENCE}`, "code")).toMatchObject({
      code: MAIN,
    });
    const codeThenFence = `const a = 1;\n${FENCE}ts\n${MAIN}\n${FENCE}`;
    expect(stripFences(codeThenFence)).toBe(codeThenFence);
  });

  test("an unclosed block: execute() runs its body, the agent reports it as cut off", () => {
    const open = `${FENCE}typescript\n${MAIN}`;
    expect(findFencedCode(open, "code")).toEqual({ kind: "unclosed", code: MAIN });
    expect(stripFences(open)).toBe(MAIN);
    expect(stripToolFences(open)).toMatchObject({ kind: "invalid" });
    expect(extractProseCode(`Here:\n${open}`)).toMatchObject({ kind: "invalid" });
  });

  test("the lexer sees template literals (with substitutions) and block comments, not quoted strings", () => {
    expect(endsInsideLiteral("const a = `x")).toBe(true);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: model code with a substitution
    expect(endsInsideLiteral("const a = `x ${ { b: 1 }.b } y`;")).toBe(false);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: model code with a substitution
    expect(endsInsideLiteral("const a = `x ${ `inner` } y")).toBe(true);
    expect(endsInsideLiteral("/* open")).toBe(true);
    expect(endsInsideLiteral("const q = '`'; // `")).toBe(false);
    expect(fencedBlocks(`${FENCE}\nuse \`x\n${FENCE}`)).toEqual([
      { language: "", body: "use `x", closed: true },
    ]);
  });
});

describe("execute() with fences (in-process sandbox)", () => {
  const open: MossRuntime[] = [];
  afterAll(async () => {
    await Promise.all(open.map((runtime) => runtime.close()));
  });

  test("runs a program whose string literal holds a markdown block, fenced or not", async () => {
    const runtime = await compileFromText(
      'import { Moss as Parent } from "../../../engine/moss.ts";\nexport class Moss extends Parent {}\n',
    );
    open.push(runtime);
    const expected = MARKDOWN_IN_LITERAL.split("`")[1]!.length;
    for (const code of [
      MARKDOWN_IN_LITERAL,
      `~~~ts\n${MARKDOWN_IN_LITERAL}\n~~~`,
      `${FENCE}ts\n${MARKDOWN_IN_LITERAL}\n${FENCE}`,
    ]) {
      const execution = await runtime.execute({ code });
      expect(execution.error).toBeUndefined();
      expect(execution.returns).toBe(expected);
    }
  });
});
