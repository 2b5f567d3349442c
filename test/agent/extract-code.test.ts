import { describe, expect, it } from "vitest";
import {
  extractProseCode,
  extractTextToolCalls,
  extractToolCode,
  stripFences,
} from "../../engine/agent/extract-code.ts";

const MAIN =
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the model's snippet holds a template literal
  'async function main(moss: Moss) {\n  const text = "}{";\n  console.log(`a ${text} b`);\n  return { n: 1 };\n}';

describe("extractToolCode", () => {
  it("reads {code} JSON", () => {
    expect(extractToolCode(JSON.stringify({ code: MAIN }))).toEqual({
      kind: "code",
      code: MAIN,
      source: "tool",
    });
  });

  it("reads arguments stringified twice", () => {
    expect(extractToolCode(JSON.stringify(JSON.stringify({ code: MAIN })))).toMatchObject({
      kind: "code",
      code: MAIN,
    });
  });

  it("unwraps code that is itself JSON-wrapped", () => {
    const wrapped = JSON.stringify({ code: JSON.stringify({ code: MAIN }) });
    expect(extractToolCode(wrapped)).toMatchObject({ kind: "code", code: MAIN });
    const nested = JSON.stringify({ code: { code: MAIN } });
    expect(extractToolCode(nested)).toMatchObject({ kind: "code", code: MAIN });
  });

  it("strips markdown fences inside the code", () => {
    for (const fence of ["typescript", "ts", ""]) {
      const fenced = JSON.stringify({ code: `\`\`\`${fence}\n${MAIN}\n\`\`\`` });
      expect(extractToolCode(fenced)).toMatchObject({ kind: "code", code: MAIN });
    }
    const withProse = JSON.stringify({ code: `Here it is:\n\`\`\`typescript\n${MAIN}\n\`\`\`\nDone.` });
    expect(extractToolCode(withProse)).toMatchObject({ kind: "code", code: MAIN });
  });

  it("tolerates raw newlines inside the JSON string", () => {
    const raw = `{"code": "async function main(moss: Moss) {\n\tconsole.log(\\"hi\\");\n}"}`;
    expect(extractToolCode(raw)).toMatchObject({
      kind: "code",
      code: 'async function main(moss: Moss) {\n\tconsole.log("hi");\n}',
    });
  });

  it("accepts bare code instead of JSON, and a single differently named string property", () => {
    expect(extractToolCode(MAIN)).toMatchObject({ kind: "code", code: MAIN });
    expect(extractToolCode(JSON.stringify({ typescript: MAIN }))).toMatchObject({ kind: "code", code: MAIN });
  });

  it("reports empty or code-less arguments as invalid with a reason", () => {
    for (const bad of [
      "",
      "   ",
      "{}",
      '{"code": ""}',
      '{"a": 1, "b": 2}',
      "[1, 2]",
      '{"code": 42}',
      "{not json",
    ]) {
      const found = extractToolCode(bad);
      expect(found.kind, bad).toBe("invalid");
      if (found.kind === "invalid") expect(found.reason.length).toBeGreaterThan(10);
    }
  });
});

describe("extractProseCode", () => {
  it("takes a typescript or ts block out of surrounding prose", () => {
    for (const tag of ["typescript", "ts", "TypeScript"]) {
      const answer = `I will roll the ball.\n\n\`\`\`${tag}\n${MAIN}\n\`\`\`\n\nThis prints the state.`;
      expect(extractProseCode(answer)).toEqual({ kind: "code", code: MAIN, source: "fence" });
    }
  });

  it("takes the last complete typescript block when there are several", () => {
    const first = "async function main(moss: Moss) {\n  return 1;\n}";
    const answer = `Wrong:\n\`\`\`ts\n${first}\n\`\`\`\nBetter:\n\`\`\`typescript\n${MAIN}\n\`\`\`\nThe shell:\n\`\`\`bash\nls\n\`\`\``;
    expect(extractProseCode(answer)).toMatchObject({ kind: "code", code: MAIN });
  });

  it("prefers typescript blocks over untagged ones, and takes untagged or js ones only when they declare main", () => {
    const answer = `\`\`\`typescript\n${MAIN}\n\`\`\`\n\`\`\`\nasync function main() { return 2 }\n\`\`\``;
    expect(extractProseCode(answer)).toMatchObject({ code: MAIN });
    expect(extractProseCode(`\`\`\`\n${MAIN}\n\`\`\``)).toMatchObject({ kind: "code", code: MAIN });
    expect(extractProseCode(`\`\`\`js\n${MAIN}\n\`\`\``)).toMatchObject({ kind: "code", code: MAIN });
    expect(extractProseCode("Output was:\n```\n42\n```\nAll done.")).toEqual({ kind: "none" });
  });

  it("reports an unclosed typescript block as invalid instead of running or ending", () => {
    const cut = `Here:\n\`\`\`typescript\nasync function main(moss: Moss) {\n  moss.`;
    expect(extractProseCode(cut).kind).toBe("invalid");
  });

  it("ignores an unclosed block that is not code, and skips it for a closed one before it", () => {
    expect(extractProseCode(`\`\`\`ts\n${MAIN}\n\`\`\`\nthen\n\`\`\`ts\nasync function`)).toMatchObject({
      kind: "code",
      code: MAIN,
    });
  });

  it("finds an unfenced main, from the main line to the brace that closes its body", () => {
    const answer = `Here is my code:\n${MAIN}\nThat is all.`;
    expect(extractProseCode(answer)).toEqual({ kind: "code", code: MAIN, source: "bare" });
  });

  it("keeps helpers above main when the answer starts with code", () => {
    const answer = `const double = (n: number) => n * 2;\n\n${MAIN}\n`;
    expect(extractProseCode(answer)).toMatchObject({ kind: "code", code: answer.trim() });
  });

  it("handles braces in strings, comments and templates when finding main's end", () => {
    const tricky =
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the model's snippet holds a template literal
      "async function main(moss: Moss): Promise<void> {\n  // } not the end\n  /* { */\n  const s = '}';\n  const t = `${'{'}${(() => { return 1; })()}`;\n}";
    expect(extractProseCode(`${tricky}\ntrailing words`)).toMatchObject({ kind: "code", code: tricky });
  });

  it("reports an unfinished unfenced main as invalid", () => {
    expect(extractProseCode("async function main(moss: Moss) {\n  await moss.body.roll(").kind).toBe(
      "invalid",
    );
  });

  it("returns none for a plain answer", () => {
    expect(extractProseCode("The ball rolled 3 times. Task done.")).toEqual({ kind: "none" });
    expect(extractProseCode("")).toEqual({ kind: "none" });
  });
});

describe("stripFences", () => {
  it("returns unfenced code unchanged and the inside of a fenced one", () => {
    expect(stripFences(`  ${MAIN}\n`)).toMatchObject({ kind: "code", code: MAIN });
    expect(stripFences(`~~~ts\n${MAIN}\n~~~`)).toMatchObject({ kind: "code", code: MAIN });
    expect(stripFences(`\`\`\`\`typescript\n${MAIN}\n\`\`\`\``)).toMatchObject({ kind: "code", code: MAIN });
  });
});

describe("extractTextToolCalls: tool calls written as plain text, as servers without a tool parser pass them on", () => {
  const code = 'async function main(moss: Moss) {\n  console.log("hi");\n}';
  const object = JSON.stringify({ name: "moss", arguments: { code } });
  const stringArgs = JSON.stringify({ name: "moss", arguments: JSON.stringify({ code }) });
  const rawNewlines = `{"name": "moss", "arguments": {"code": "async function main(moss: Moss) {\n  console.log(\\"hi\\");\n}"}}`;
  const shapes: Array<[string, string]> = [
    ["Hermes/Qwen <tool_call>", `I'll print it.\n<tool_call>\n${object}\n</tool_call>`],
    ["<tool_call> with string arguments", `<tool_call>${stringArgs}</tool_call>`],
    ["<tool_call> with raw newlines in the code", `<tool_call>\n${rawNewlines}\n</tool_call>`],
    ["unclosed <tool_call> at the end", `<tool_call>\n${object}`],
    ["<tool_call> holding a ```json block", `<tool_call>\n\`\`\`json\n${object}\n\`\`\`\n</tool_call>`],
    ["<|tool_call|> (Phi style)", `<|tool_call|>${object}<|/tool_call|>`],
    [
      "Llama <|python_tag|> with parameters",
      `<|python_tag|>${JSON.stringify({ name: "moss", parameters: { code } })}<|eom_id|>`,
    ],
    ["Llama <|python_tag|> with bare code", `<|python_tag|>${code}`],
    ["Llama <function=moss>", `<function=moss>${JSON.stringify({ code })}</function>`],
    ["Mistral [TOOL_CALLS] list", `[TOOL_CALLS][${object}]`],
    ["Mistral [TOOL_CALLS]name[ARGS]", `[TOOL_CALLS]moss[ARGS]${JSON.stringify({ code })}`],
    ["functools[...]", `functools[${object}]`],
    ["bare JSON call", object],
    ["JSON call in a ```json block", `Calling the tool:\n\`\`\`json\n${object}\n\`\`\``],
    [
      "OpenAI-shaped {function: {...}} text",
      JSON.stringify({ type: "function", function: { name: "moss", arguments: JSON.stringify({ code }) } }),
    ],
    [
      "{tool_calls: [...]} text",
      JSON.stringify({ tool_calls: [{ function: { name: "moss", arguments: { code } } }] }),
    ],
    ["functions.moss name", JSON.stringify({ name: "functions.moss", arguments: { code } })],
  ];
  for (const [label, content] of shapes) {
    it(`reads ${label}`, () => {
      const found = extractTextToolCalls(content);
      expect(found.kind).toBe("calls");
      if (found.kind !== "calls") return;
      expect(found.calls).toHaveLength(1);
      expect(found.calls[0]!.name).toBe("moss");
      expect(extractToolCode(found.calls[0]!.arguments)).toMatchObject({ kind: "code", code });
    });
  }

  it("reads several <tool_call> blocks in order", () => {
    const second = JSON.stringify({ name: "moss", arguments: { code: "async function main() {}" } });
    const found = extractTextToolCalls(`<tool_call>${object}</tool_call>\n<tool_call>${second}</tool_call>`);
    expect(found.kind === "calls" && found.calls.map((call) => JSON.parse(call.arguments).code)).toEqual([
      code,
      "async function main() {}",
    ]);
  });

  it("reports a <tool_call> block that is not JSON, naming the block", () => {
    const found = extractTextToolCalls("<tool_call>{name: moss, code</tool_call>");
    expect(found.kind).toBe("invalid");
    expect(found.kind === "invalid" && found.reason).toContain("<tool_call>");
  });

  it("leaves prose, fenced TypeScript and JSON data that is not a call alone", () => {
    for (const content of [
      "All done: the ball rolled in a square.",
      `\`\`\`typescript\n${code}\n\`\`\``,
      '{"name": "Alice", "age": 3}',
      "```json\n[1, 2, 3]\n```",
    ]) {
      expect(extractTextToolCalls(content)).toEqual({ kind: "none" });
    }
  });
});
