import { describe, expect, test } from "vitest";
import { blankHiddenSource, findHiddenRegions, visibleSource } from "../../engine/module/hidden-regions.ts";

const lines = (...text: string[]) => text.join("\n");

describe("hidden regions", () => {
  test("a region hides its lines and both marker lines", () => {
    const source = lines("a", "// <moss-hide>", "b", "// </moss-hide>", "c");
    expect(visibleSource(source)).toBe(lines("a", "c"));
  });

  test("markers are recognised by trimmed text and may carry trailing words", () => {
    const source = lines("a", "   // <moss-hide> helpers below", "b", "\t// </moss-hide> end", "c");
    expect(visibleSource(source)).toBe(lines("a", "c"));
  });

  test("regions nest: the outer close ends hiding, an inner close does not", () => {
    const source = lines(
      "a",
      "// <moss-hide>",
      "b",
      "// <moss-hide>",
      "c",
      "// </moss-hide>",
      "d",
      "// </moss-hide>",
      "e",
    );
    expect(visibleSource(source)).toBe(lines("a", "e"));
    expect(findHiddenRegions(source).regions).toEqual([{ start: 2, end: 8 }]);
  });

  test("an unclosed region hides to the end of the file", () => {
    const source = lines("a", "// <moss-hide>", "b", "c");
    expect(visibleSource(source)).toBe("a");
  });

  test("a stray close is ignored but its marker line never appears", () => {
    const source = lines("a", "// </moss-hide>", "b");
    expect(visibleSource(source)).toBe(lines("a", "b"));
    expect(findHiddenRegions(source).regions).toEqual([]);
  });

  test("a marker inside other text is not a marker", () => {
    const source = lines("const s = '// <moss-hide>';", "b");
    expect(visibleSource(source)).toBe(source);
  });

  test("blanking keeps the line count so positions still map", () => {
    const source = lines("a", "// <moss-hide>", "b", "// </moss-hide>", "c");
    expect(blankHiddenSource(source)).toBe(lines("a", "", "", "", "c"));
  });
});
