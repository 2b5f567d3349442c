import { describe, expect, it } from "vitest";
import {
  FAILURE_HINT,
  NOT_TYPE_CHECKED,
  NOTHING_OBSERVED,
  PAUSED_NOTE,
  renderObservation,
} from "../../engine/agent/observation.ts";
import { truncateMiddle } from "../../engine/format-value.ts";
import type { Execution } from "../../engine/types.ts";

function execution(overrides: Partial<Execution>): Execution {
  return {
    ok: true,
    returns: undefined,
    stdout: "",
    warnings: [],
    context: { version: 1, module: "m.ts", properties: {}, executed: false },
    durationMs: 1,
    calls: [],
    ...overrides,
  };
}

describe("truncateMiddle", () => {
  it("keeps short text and cuts long text to the bound with a marker naming the cut", () => {
    expect(truncateMiddle("short", 100)).toBe("short");
    const long = `HEAD${"x".repeat(10_000)}TAIL`;
    const cut = truncateMiddle(long, 300);
    expect(cut.length).toBeLessThanOrEqual(300);
    expect(cut.startsWith("HEAD")).toBe(true);
    expect(cut.endsWith("TAIL")).toBe(true);
    const removed = Number(/\[truncated (\d+) characters\]/.exec(cut)?.[1]);
    expect(removed).toBe(
      long.length - (cut.length - cut.match(/\n… \[truncated \d+ characters\] …\n/)![0].length),
    );
  });
});

describe("renderObservation", () => {
  it("a paused run lists what it waits for and is not called a failure", () => {
    const text = renderObservation(
      execution({
        ok: false,
        stdout: "checking\n",
        pending: {
          continuation: "moss1.x.y",
          requests: [
            {
              id: "r1",
              kind: "approval",
              service: "vault",
              member: "transfer",
              args: ["bob", 5],
              reason: "tag",
              line: 2,
            },
            { id: "r2", kind: "clarification", question: "Which colour?", choices: ["red", "blue"] },
          ],
        },
      }),
    );
    expect(text).toBe(
      [
        '<execution ok="false">',
        "<stdout>\nchecking\n</stdout>",
        '<pending>\n- #r1 approval vault.transfer("bob", 5) at line 2\n- #r2 question: Which colour? [red | blue]\n</pending>',
        PAUSED_NOTE,
        "</execution>",
      ].join("\n"),
    );
    expect(text).not.toContain(FAILURE_HINT);
  });

  it("shows stdout, the return value and warnings of a successful run", () => {
    const text = renderObservation(
      execution({
        stdout: "rolled\n",
        returns: { moves: 4, shape: "square" },
        warnings: ["field x is not persistable"],
      }),
    );
    expect(text).toContain('<execution ok="true">');
    expect(text).toContain("<stdout>\nrolled\n</stdout>");
    expect(text).toContain("moves: 4");
    expect(text).toContain("- field x is not persistable");
    expect(text).not.toContain(FAILURE_HINT);
  });

  it("says so when nothing was printed or returned", () => {
    expect(renderObservation(execution({}))).toContain(NOTHING_OBSERVED);
  });

  it("shows a runtime error with its snippet location, frame and snippet stack", () => {
    const text = renderObservation(
      execution({
        ok: false,
        stdout: "before\n",
        error: {
          kind: "runtime",
          name: "RangeError",
          message: "speed must be 0–255",
          line: 3,
          column: 9,
          frame: "> 3 |   await moss.body.roll(0, 999, 1);\n    |         ^",
          stack: "RangeError: speed must be 0–255\n    at main (snippet.ts:3:9)",
        },
      }),
    );
    expect(text).toContain('<error kind="runtime">');
    expect(text).toContain("RangeError: speed must be 0–255");
    expect(text).toContain("at snippet.ts:3:9");
    expect(text).toContain("> 3 |   await moss.body.roll(0, 999, 1);");
    expect(text).toContain("at main (snippet.ts:3:9)");
    expect(text).toContain("<stdout>\nbefore\n</stdout>");
    expect(text).toContain(FAILURE_HINT);
  });

  it("lists type diagnostics with code, location and frame", () => {
    const text = renderObservation(
      execution({
        ok: false,
        error: {
          kind: "type",
          name: "TypeError",
          message: "Property 'rol' does not exist on type 'Ball'.",
          line: 2,
          column: 19,
          diagnostics: [
            {
              code: 2551,
              message: "Property 'rol' does not exist on type 'Ball'. Did you mean 'roll'?",
              line: 2,
              column: 19,
              severity: "error",
              frame: "> 2 |   await moss.body.rol(0, 100, 1);",
            },
          ],
        },
      }),
    );
    expect(text).toContain("<diagnostics>");
    expect(text).toContain(NOT_TYPE_CHECKED);
    expect(text.match(/TS2551/g)).toHaveLength(1);
    expect(text).toContain(
      "snippet.ts:2:19 - error TS2551: Property 'rol' does not exist on type 'Ball'. Did you mean 'roll'?",
    );
    expect(text).toContain("> 2 |   await moss.body.rol(0, 100, 1);");
  });

  it("bounds stdout, returns and the whole observation, with visible truncation markers", () => {
    const stdout = Array.from({ length: 5_000 }, (_, index) => `line ${index}`).join("\n");
    const text = renderObservation(execution({ stdout, returns: "y".repeat(50_000) }), {
      maxChars: 2_000,
      maxStdoutChars: 1_000,
      maxReturnsChars: 500,
    });
    expect(text.length).toBeLessThanOrEqual(2_000);
    expect(text).toMatch(/\[truncated \d+ characters\]/);
    expect(text).toContain("line 0");
    expect(text.endsWith("</execution>")).toBe(true);
    const small = renderObservation(execution({ stdout, returns: 1 }), {
      maxChars: 600,
      maxStdoutChars: 100_000,
    });
    expect(small.length).toBeLessThanOrEqual(600);
    expect(small).toMatch(/\[truncated \d+ characters\]/);
  });
});
