import { expect, test } from "vitest";
import { codeFrame } from "../../engine/errors.ts";

const SOURCE = "const a = 1;\nconst b = moss.robot.move(a);\nreturn b;";

test("the marked line has a caret under its 1-based column", () => {
  expect(codeFrame(SOURCE, 2, 22, 1)).toBe(
    [
      "  1 | const a = 1;",
      "> 2 | const b = moss.robot.move(a);",
      "    |                      ^",
      "  3 | return b;",
    ].join("\n"),
  );
});

test("a column that is not known (0) marks the line without a caret, rather than one at its start", () => {
  expect(codeFrame(SOURCE, 2, 0, 0)).toBe("> 2 | const b = moss.robot.move(a);");
});
