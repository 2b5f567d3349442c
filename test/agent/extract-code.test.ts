import { describe, expect, it } from "vitest";
import { extractProseCode, extractToolCode, stripFences } from "../../engine/agent/extract-code.ts";

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
