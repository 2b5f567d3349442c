import { describe, expect, it } from "vitest";
import { renderDiagnostics } from "../../engine/render-diagnostics.ts";
import type { Diagnostic } from "../../engine/types.ts";

function diagnostic(line: number, code: number, severity: Diagnostic["severity"] = "error"): Diagnostic {
  return {
    code,
    message: `problem ${code} on ${line}`,
    line,
    column: 3,
    severity,
    frame: `> ${line} | code\n    |   ^`,
  };
}

describe("renderDiagnostics", () => {
  it("renders location, severity, code, message and frame", () => {
    expect(renderDiagnostics([diagnostic(2, 2551)])).toBe(
      "snippet.ts:2:3 - error TS2551: problem 2551 on 2\n> 2 | code\n    |   ^",
    );
  });

  it("labels moss-specific codes as MOSS codes", () => {
    expect(renderDiagnostics([diagnostic(1, 90001)])).toContain("error MOSS90001: problem 90001 on 1");
  });

  it("puts errors before warnings and earlier lines first", () => {
    const text = renderDiagnostics([
      diagnostic(1, 90005, "warning"),
      diagnostic(9, 2322),
      diagnostic(4, 2345),
    ]);
    const order = ["TS2345", "TS2322", "MOSS90005"].map((code) => text.indexOf(code));
    expect(order.every((position) => position >= 0)).toBe(true);
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });

  it("drops duplicates of the same line and code", () => {
    const text = renderDiagnostics([
      diagnostic(2, 2345),
      { ...diagnostic(2, 2345), column: 9 },
      diagnostic(2, 2322),
    ]);
    expect(text.match(/TS2345/g)).toHaveLength(1);
    expect(text).toContain("TS2322");
  });

  it("shows at most `max` diagnostics and counts the rest", () => {
    const many = Array.from({ length: 8 }, (_, index) => diagnostic(index + 1, 2304));
    const text = renderDiagnostics(many);
    expect(text.match(/TS2304/g)).toHaveLength(5);
    expect(text.endsWith("… and 3 more")).toBe(true);
    const two = renderDiagnostics(many, { max: 2 });
    expect(two.match(/TS2304/g)).toHaveLength(2);
    expect(two).toContain("snippet.ts:2:3");
    expect(two).not.toContain("snippet.ts:3:3");
    expect(two.endsWith("… and 6 more")).toBe(true);
  });

  it("renders nothing for no diagnostics", () => {
    expect(renderDiagnostics([])).toBe("");
  });
});
