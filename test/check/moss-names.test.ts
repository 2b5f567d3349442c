import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MOSS_DIAGNOSTIC_CODES } from "../../engine/check/index.ts";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { isReachableGlobalName } from "../../engine/membrane/visibility.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";

/*
 * Names starting with `__moss_` are moss-ts's own (visibility.ts's `isReachableGlobalName`): the sandbox defines none
 * of them for model code, even when the context module declares one visibly. Each row is read from both real
 * consumers: the strict type-check refuses the snippet with diagnostic 90011 exactly when the same code, run
 * unchecked in the sandbox, fails for want of the name; a name that merely contains `moss` is the user's.
 */

const CONTEXT_FILE = path.resolve("test/fixtures/check/moss-names-context.ts");

interface Row {
  label: string;
  code: string;
  /** The `__moss_` name the checker refuses (absent: the snippet is fine). */
  refused?: string;
  /** The one diagnostic's code when refused (default: mossName). */
  expectCode?: number;
}

const main = (body: string): string => `function main(moss: Moss) {\n  ${body}\n}`;

const TABLE: readonly Row[] = [
  {
    label: "a module's visible __moss_ function",
    code: main('return __moss_call("x");'),
    refused: "__moss_call",
  },
  {
    label: "a module's visible __moss_ constant",
    code: main("return __moss_limit + 1;"),
    refused: "__moss_limit",
  },
  {
    label: "a module's visible hook",
    code: main("return __moss_compiled__(moss);"),
    refused: "__moss_compiled__",
  },
  {
    label: "a bridge-like name nobody declares",
    code: main("return __moss_bridge(1);"),
    refused: "__moss_bridge",
  },
  {
    label: "a __moss_ global through globalThis",
    code: main('return (globalThis as any).__moss_call("x");'),
    refused: "__moss_call",
  },
  {
    label: "a __moss_ global by a literal key",
    code: main('const scope: any = globalThis;\n  return scope["__moss_host"]();'),
    refused: "__moss_host",
  },
  {
    label: "a __moss_ member of moss",
    code: main("return (moss as any).__moss_state();"),
    refused: "__moss_state",
  },
  {
    label: "a __moss_ name the snippet only declares ambiently",
    code: `declare function __moss_native(): number;\n${main("return __moss_native();")}`,
    refused: "__moss_native",
  },
  {
    label: "a __moss_ name the module hides",
    code: main("return __moss_hidden();"),
    refused: "__moss_hidden",
    expectCode: MOSS_DIAGNOSTIC_CODES.hiddenName,
  },
  { label: "module names that merely contain moss", code: main("return mossLevel + mossHelper(1);") },
  {
    label: "the snippet's own names that contain moss",
    code: main(
      "const my__moss_x = 1;\n  const __mossy = 2;\n  const _moss_ = 3;\n  return my__moss_x + __mossy + _moss_;",
    ),
  },
  { label: "the snippet's own __moss_ variable", code: main("const __moss_own = 2;\n  return __moss_own;") },
  {
    label: "a __moss_ key of the snippet's own dictionary",
    code: main(
      'const counts: Record<string, number> = { __moss_seen: 1 };\n  return counts.__moss_seen + counts["__moss_seen"];',
    ),
  },
  {
    label: "a __moss_ member of the snippet's own object",
    code: main("const tagged = { __moss_tag: 4 };\n  return tagged.__moss_tag;"),
  },
];

describe("the name rule itself", () => {
  test.each([
    ["__moss_", false],
    ["__moss_call", false],
    ["__moss_compile__", false],
    ["mossLevel", true],
    ["__mossy", true],
    ["_moss_", true],
    ["my__moss_x", true],
    ["__MOSS_x", true],
    ["moss", true],
    ["", true],
  ] as const)("%s: reachable = %s", (name, reachable) => {
    expect(isReachableGlobalName(name)).toBe(reachable);
  });
});

describe("the checker refuses a __moss_ name exactly when the sandbox lacks it", () => {
  let runtime: MossRuntime;
  beforeAll(async () => {
    runtime = await new MossCompiler({ sandbox: "in-process", typeCheck: "strict" }).compile(CONTEXT_FILE);
  });
  afterAll(async () => {
    await runtime?.close();
    await closeSharedSandboxes();
  });

  test.each(TABLE)("$label", async ({ code, refused, expectCode = MOSS_DIAGNOSTIC_CODES.mossName }) => {
    const checked = await runtime.execute({ code });
    if (refused === undefined) {
      expect(checked.error, JSON.stringify(checked.error)).toBeUndefined();
      expect(checked.ok).toBe(true);
    } else {
      expect(checked.ok).toBe(false);
      expect(checked.error?.kind).toBe("type");
      // One diagnostic, at the use of the name (an ambient declaration of it is not a use).
      const diagnostics = checked.error?.diagnostics ?? [];
      expect(diagnostics, JSON.stringify(diagnostics)).toHaveLength(1);
      const [diagnostic] = diagnostics;
      expect(diagnostic!.code).toBe(expectCode);
      expect(diagnostic!.message).toContain(`'${refused}' is not available`);
      const lines = code.split("\n");
      const line = lines.length - [...lines].reverse().findIndex((text) => text.includes(refused));
      expect(diagnostic!.line).toBe(line);
      expect(diagnostic!.frame).toContain(refused);
    }
    // Reality: the same code unchecked fails in the sandbox exactly when the checker refused it.
    const unchecked = await runtime.execute({ code, typeCheck: "off" });
    expect(unchecked.ok, JSON.stringify(unchecked.error)).toBe(refused === undefined);
    if (refused !== undefined) {
      expect(unchecked.error?.kind).toBe("runtime");
      expect(unchecked.error?.name).toMatch(/^(ReferenceError|TypeError)$/);
    }
  });
});
