import { describe, expect, expectTypeOf, it } from "vitest";
import type { Container } from "../../container/index.ts";
import type { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type * as Surface from "../../engine/module-surface.ts";
import type { MossPrompter } from "../../engine/prompter/moss-prompter.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { compileFromText } from "../helpers/compile-from-text.ts";

describe("the moss-ts surface a context module is checked against", () => {
  it("is what the real classes offer (checked by tsc: a class that stops fitting fails the typecheck)", () => {
    expectTypeOf<MossCompiler>().toExtend<Surface.MossCompiler>();
    expectTypeOf<MossPrompter>().toExtend<Surface.MossPrompter>();
    expectTypeOf<MossRuntime>().toExtend<Surface.MossRuntime>();
    expectTypeOf<Container>().toExtend<Surface.Container>();
    expectTypeOf<MossCompiler>().not.toExtend<Surface.MossCompiler & { extra(): void }>();
  });

  it("types every hook's argument: a module using them type-checks, a misuse is a type error", async () => {
    const hooks = `
import { Moss as Parent, type MossCompiler, type MossPrompter, type MossRuntime, type ExecuteRequest, type Execution } from "moss-ts";
export class Moss extends Parent { count = 0 }
// <moss-hide>
export function __moss_compile__(compiler: MossCompiler) { compiler.container().bind("x", 1); compiler.injects({ count: 1 }); }
export async function __moss_module_prompt__(prompter: MossPrompter) { return prompter.sourceCode({ excludeHidden: true }); }
export async function __moss_exec__(runtime: MossRuntime, request: ExecuteRequest, next: (request: ExecuteRequest) => Promise<Execution>) {
  return next({ ...request, timeoutMs: request.timeoutMs ?? 1000 });
}
// </moss-hide>
`;
    const runtime = await compileFromText(hooks);
    await runtime.close();
    await expect(
      compileFromText(hooks.replace("compiler.injects({", "compiler.inject({")),
    ).rejects.toMatchObject({
      code: "module-type-error",
      message: expect.stringMatching(
        /:5:\d+ - error TS2551: Property 'inject' does not exist on type 'MossCompiler'/,
      ),
    });
  });
});
