import fc from "fast-check";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { decodeProperties } from "../../engine/context/index.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import type { Execution, MossContext } from "../../engine/types.ts";
import { writeModule } from "../helpers/compile-from-text.ts";

// Issue 24 §1: a run could write a context its own engine refused to read (model code storing `null` in a field
// declared `Date` was persisted, and the next compile failed "a stored value does not fit the field's declared
// type … nothing was loaded"). The declared-type rule holds where data are written as where they are read.
const MODULE = `import { Moss as Parent } from "moss-ts";

export class Moss extends Parent {
  when: Date = new Date(0);
  count = 0;
  tags: string[] = [];
  pair: { a: number; b?: string } = { a: 1 };
  later!: Date;
  anything: unknown = null;
}
`;
const FIELDS = ["when", "count", "tags", "pair", "later", "anything"] as const;

type Sandbox = "in-process" | "process";
let modulePath: string;
const open: MossRuntime[] = [];
beforeAll(async () => {
  modulePath = await writeModule(MODULE, "written-context");
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((runtime) => runtime.close()));
});
afterAll(async () => {
  await closeSharedSandboxes();
});

async function compile(
  sandbox: Sandbox,
  context?: MossContext,
  configure: (compiler: MossCompiler) => void = () => {},
): Promise<MossRuntime> {
  const compiler = new MossCompiler({ sandbox, typeCheck: "off" });
  if (context !== undefined) compiler.joinContext(context);
  configure(compiler);
  const runtime = await compiler.compile(modulePath);
  open.push(runtime);
  return runtime;
}

function run(runtime: MossRuntime, body: string): Promise<Execution> {
  return runtime.execute({ code: `function main(moss: any) { ${body} }` });
}

/** The context as a store keeps it (a JSON text), loaded by a new compile: it must load. */
async function reloaded(sandbox: Sandbox, runtime: MossRuntime): Promise<MossRuntime> {
  return compile(sandbox, JSON.parse(JSON.stringify(runtime.dumpContext())));
}

describe.each(["in-process", "process"] as const)(
  "a context a run writes loads again (%s driver)",
  (sandbox) => {
    test("null stored in a Date field is refused at the end of the run, named, and the last good value stays", async () => {
      const runtime = await compile(sandbox);
      await run(runtime, `moss.when = new Date(42);`);
      const execution = await run(runtime, `moss.when = null; moss.count = 5;`);
      expect(execution.ok).toBe(true);
      expect(execution.warnings.join("\n")).toMatch(
        /moss\.when does not fit its declared type \(properties\.when: expected Date, got null\); it was not persisted/,
      );
      // The saved context keeps the last good value, and the other field the run changed.
      const stored = decodeProperties(runtime.dumpContext().properties) as Record<string, unknown>;
      expect(stored.when).toEqual(new Date(42));
      expect(stored.count).toBe(5);
      // The live session too: its next run sees the last good value, not the refused one.
      const live = await run(
        runtime,
        `return [moss.when instanceof Date, moss.when?.getTime(), moss.count];`,
      );
      expect(live.returns).toEqual([true, 42, 5]);
      // And the context loads again.
      const again = await reloaded(sandbox, runtime);
      const seen = await run(again, `return [moss.when.getTime(), moss.count];`);
      expect(seen.returns).toEqual([42, 5]);
    });

    test("a nested misfit is refused with its path; a field with no saved value stays unsaved", async () => {
      const runtime = await compile(sandbox);
      const execution = await run(
        runtime,
        `moss.pair = { a: "one" }; moss.later = "tomorrow"; moss.tags = ["x"];`,
      );
      const warnings = execution.warnings.join("\n");
      expect(warnings).toMatch(
        /moss\.pair does not fit its declared type \(properties\.pair\.a: expected number/,
      );
      expect(warnings).toMatch(
        /moss\.later does not fit its declared type \(properties\.later: expected Date/,
      );
      const stored = decodeProperties(runtime.dumpContext().properties) as Record<string, unknown>;
      expect(stored.pair).toEqual({ a: 1 });
      expect(Object.hasOwn(stored, "later")).toBe(false);
      expect(stored.tags).toEqual(["x"]);
      const again = await reloaded(sandbox, runtime);
      expect((await run(again, `return [moss.pair, moss.tags];`)).returns).toEqual([{ a: 1 }, ["x"]]);
    });

    test("an uninitialised `later!: Date` is not stored, so the context loads again", async () => {
      const runtime = await compile(sandbox);
      await run(runtime, `moss.count = 1;`);
      expect(Object.hasOwn(runtime.dumpContext().properties, "later")).toBe(false);
      const again = await reloaded(sandbox, runtime);
      expect((await run(again, `return moss.count;`)).returns).toBe(1);
      // Once model code gives it a Date, it is stored and loads.
      await run(again, `moss.later = new Date(7);`);
      const third = await reloaded(sandbox, again);
      expect((await run(third, `return moss.later.getTime();`)).returns).toBe(7);
    });
  },
);

describe("data the host sets go through the same rule", () => {
  test("injects() with a value that does not fit is a context-mismatch at compile", async () => {
    await expect(
      compile("in-process", undefined, (compiler) => compiler.injects({ when: "not a date" })),
    ).rejects.toMatchObject({
      code: "context-mismatch",
      details: { fields: ["when"] },
      message: expect.stringContaining("properties.when: expected Date, got string"),
    });
  });

  test("__moss_compiled__ setting a field to a misfit is a context-mismatch at compile", async () => {
    const hooked = await writeModule(
      `${MODULE}
// <moss-hide>
export function __moss_compiled__(moss: Moss) { (moss as any).count = "many"; }
// </moss-hide>
`,
      "written-context-hook",
    );
    await expect(
      new MossCompiler({ sandbox: "in-process", typeCheck: "off" }).compile(hooked),
    ).rejects.toMatchObject({
      code: "context-mismatch",
      details: { fields: ["count"] },
    });
  });
});

// Values model code may leave in a data field (through `any`), written as code.
type Shaped = { code: string };
const leaf: fc.Arbitrary<Shaped> = fc
  .oneof(
    fc.constantFrom("null", "undefined", "NaN", "-0", "true", "[]", "({})", "new Map()", "new Set([1])"),
    fc.integer().map(String),
    fc.string({ maxLength: 6 }).map((text) => JSON.stringify(text)),
    fc.integer({ min: 0, max: 1e12 }).map((time) => `new Date(${time})`),
    fc.bigInt({ min: -(10n ** 6n), max: 10n ** 6n }).map((big) => `${big}n`),
  )
  .map((code) => ({ code }));
const { value: shaped } = fc.letrec<{ value: Shaped }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc
      .array(tie("value"), { maxLength: 3 })
      .map((items) => ({ code: `[${items.map((item) => item.code).join(", ")}]` })),
    fc.dictionary(fc.constantFrom("a", "b", "c"), tie("value"), { maxKeys: 3 }).map((record) => ({
      code: `({ ${Object.entries(record)
        .map(([key, item]) => `${key}: ${item.code}`)
        .join(", ")} })`,
    })),
  ),
}));
const assignments = fc.dictionary(fc.constantFrom(...FIELDS), shaped, { minKeys: 1, maxKeys: 3 });

describe.each(["in-process", "process"] as const)(
  "property: what model code leaves in its data fields (%s driver)",
  (sandbox) => {
    test("either loads again or was refused with the field named", async () => {
      await fc.assert(
        fc.asyncProperty(assignments, async (assigned) => {
          const runtime = await compile(sandbox);
          const body = Object.entries(assigned)
            .map(([field, value]) => `moss.${field} = ${value.code};`)
            .join(" ");
          const execution = await run(runtime, body);
          expect(execution.error).toBeUndefined();
          const warnings = execution.warnings.join("\n");
          // Every context the engine wrote loads again (a refusal here is the bug this property guards).
          const again = await reloaded(sandbox, runtime);
          const fields = Object.keys(assigned);
          const read = `return [${fields.map((field) => `moss.${field}`).join(", ")}];`;
          const live = await run(runtime, read);
          const loaded = await run(again, read);
          const direct = await run(
            runtime,
            `return [${fields.map((field) => assigned[field as never]!.code).join(", ")}];`,
          );
          expect(loaded.error).toBeUndefined();
          fields.forEach((field, index) => {
            const refused = warnings.includes(`moss.${field} does not fit its declared type`);
            const fromContext = (loaded.returns as unknown[])[index];
            // The live session and the loaded context agree, whether the value was kept or refused.
            expect(fromContext).toEqual((live.returns as unknown[])[index]);
            // Not refused: what the code assigned is what the context holds.
            if (!refused) expect(fromContext).toEqual((direct.returns as unknown[])[index]);
          });
          await Promise.all(open.splice(0).map((opened) => opened.close()));
        }),
        {
          numRuns: Number(process.env.MOSS_PROPERTY_RUNS ?? 15),
          seed: Number(process.env.MOSS_PROPERTY_SEED ?? 24),
        },
      );
    }, 240_000);
  },
);
