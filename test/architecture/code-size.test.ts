import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, expect, test } from "vitest";
// @ts-expect-error: a plain JavaScript script without declarations
import { codeSizes, MAX_FILE_LINES, MAX_FUNCTION_LINES } from "../../scripts/code-size.js";

const temp = mkdtempSync(path.join(tmpdir(), "moss-code-size-"));
afterAll(() => rmSync(temp, { recursive: true, force: true }));

test("no source file is over 800 lines and no function over 250 (issue 25: rooms, not long files)", () => {
  const sizes = codeSizes(path.resolve("."));
  expect(sizes.files).toBeGreaterThan(100);
  expect(sizes.largeFiles).toEqual([]);
  expect(sizes.largeFunctions).toEqual([]);
});

test("a file or a function past its bound is reported by name and size", () => {
  const folder = path.join(temp, "engine");
  mkdirSync(folder, { recursive: true });
  const body = Array.from({ length: MAX_FUNCTION_LINES }, (_, i) => `  const v${i} = ${i};`).join("\n");
  writeFileSync(path.join(folder, "long.ts"), `export function long() {\n${body}\n}\n`);
  writeFileSync(path.join(folder, "big.ts"), "export const x = 1;\n".repeat(MAX_FILE_LINES + 1));
  const sizes = codeSizes(temp);
  expect(sizes.largeFunctions).toEqual([
    { file: "engine/long.ts", name: "long", lines: MAX_FUNCTION_LINES + 2 },
  ]);
  expect(sizes.largeFiles).toEqual([{ file: "engine/big.ts", lines: MAX_FILE_LINES + 1 }]);
});
