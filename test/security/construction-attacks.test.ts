import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { MossError } from "../../engine/errors.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { compileFromText } from "../helpers/compile-from-text.ts";
import { okOf } from "../helpers/durable.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";
import { SecurityRig } from "./security-harness.ts";

/*
 * Model code constructs only what it may (issue 15, part 4): a service class — the declared type of a `moss`
 * service field or a class bound in the container — is never constructible from model code, by any path, even
 * when the module imports it as a value (as the `binding-missing` error advises). Classes the module declares for
 * the model to build values with do construct.
 */

const ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const MODULE = path.join(ROOT, "test/fixtures/security/call-path-context.ts");

interface HostBank {
  lockers(): string[];
}

const runtimes = runtimesClosedAfterAll();

async function compile(sandbox: "process" | "in-process"): Promise<{ runtime: MossRuntime; bank: HostBank }> {
  const runtime = await new MossCompiler({ sandbox }).compile(MODULE);
  runtimes.push(runtime);
  return { runtime, bank: runtime.mossInjections().bank as HostBank };
}

describe.each(["in-process", "process"] as const)("construction attacks (%s driver)", (sandbox) => {
  test("a service class is never constructed by model code, by any path", async () => {
    const { runtime, bank } = await compile(sandbox);
    const attempts = [
      `new Locker("/tmp/evil-new")`,
      `Reflect.construct(Locker, ["/tmp/evil-reflect"])`,
      `(() => { class Mine extends Locker {} return new Mine("/tmp/evil-subclass"); })()`,
      `new BigLocker("/tmp/evil-module-subclass")`,
      `moss.bank.build(Locker, "/tmp/evil-host-builds")`,
      `moss.bank.build(BigLocker, "/tmp/evil-host-builds-subclass")`,
      `new (moss.locker as any).constructor("/tmp/evil-constructor")`,
      `new (Object.getPrototypeOf(moss.locker) as any).constructor("/tmp/evil-prototype")`,
    ];
    const code = `async function main(moss: Moss) {
  const outcomes: string[] = [];
  const tries: Array<() => unknown> = [
${attempts.map((attempt) => `    () => ${attempt},`).join("\n")}
  ];
  for (const attempt of tries) {
    try { await attempt(); outcomes.push("constructed"); } catch (error) { outcomes.push((error as Error).name); }
  }
  return [outcomes, typeof Locker, moss.locker.contents()];
}`;
    const [outcomes, kind, contents] = okOf(await runtime.execute({ typeCheck: "off", code })) as [
      string[],
      string,
      string,
    ];
    expect(outcomes).toEqual(attempts.map(() => "TypeError"));
    // The class stays out of reach as a value with nothing to call, and the real service is untouched.
    expect(kind).toBe("object");
    expect(contents).toBe("contents of host");
    expect(bank.lockers()).toEqual(["host"]);
  });

  test("the security fixture's service class, imported as a value token, cannot be constructed", async () => {
    const rig = await new SecurityRig(sandbox).open();
    try {
      const execution = await rig.run(`function main(moss: Moss) {
  const outcomes: string[] = [];
  for (const attempt of [() => new Vault(), () => Reflect.construct(Vault as any, []), () => new (class extends (Vault as any) {})()]) {
    try { attempt(); outcomes.push("constructed"); } catch (error) { outcomes.push((error as Error).name); }
  }
  return outcomes;
}`);
      expect(okOf(execution)).toEqual(["TypeError", "TypeError", "TypeError"]);
      await rig.expectHostUnchanged();
    } finally {
      await rig.close();
    }
  });

  test("classes the module declares for the model to build values with construct, type-checked", async () => {
    const { runtime } = await compile(sandbox);
    const execution = await runtime.execute({
      code: `function main(moss: Moss) {
  const receipt = new Receipt("alice", 5);
  const other = Reflect.construct(Receipt, ["bob", 6]) as Receipt;
  return [receipt.line(), other.line(), receipt.to];
}`,
    });
    expect(okOf(execution)).toEqual(["alice:5", "bob:6", "alice"]);
  });
});

test("the type-check refuses new on a service class, as the membrane does", async () => {
  const { runtime } = await compile("in-process");
  const diagnostics = await runtime.typecheck(
    `function main(moss: Moss) { return new Locker("/tmp/x").contents(); }`,
  );
  expect(diagnostics).toEqual([
    expect.objectContaining({
      severity: "error",
      message: expect.stringMatching(/Locker is a service class/),
    }),
  ]);
  expect(await runtime.typecheck(`function main(moss: Moss) { return new Receipt("a", 1).line(); }`)).toEqual(
    [],
  );
});

test("the binding-missing error's advice does not promise a constructible class", async () => {
  const error = await compileFromText(`import { Moss as Base } from "moss-ts";
import type { Locker } from "${MODULE.replace(/\\/g, "/")}";
export class Moss extends Base {
  locker!: Locker;
}
`).then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(MossError.is(error, "binding-missing")).toBe(true);
  expect((error as Error).message).toMatch(/import it as a value to use the class as the token/);
  expect((error as Error).message).toMatch(/model code still cannot construct a service class/);
});
