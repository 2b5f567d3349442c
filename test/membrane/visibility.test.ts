import { readFileSync } from "node:fs";
import path from "node:path";
import { Project, ts } from "ts-morph";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MOSS_DIAGNOSTIC_CODES, ModuleChecker } from "../../engine/check/index.ts";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { decodeWire, encodeWire } from "../../engine/membrane/host/host-wire.ts";
import { isReachableMember, isReachableName, NEVER_REACHED_NAMES } from "../../engine/membrane/visibility.ts";
import { isPublicMember } from "../../engine/module/module-analysis.ts";
import { isNonPublicMember } from "../../engine/prompter/render-declaration.ts";
import { DeclaredTypes } from "../../engine/runtime/declared-members.ts";
import { HandleMembrane } from "../../engine/runtime/host-membrane.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { closeSharedSandboxes } from "../../engine/runtime/shared-sandbox.ts";
import { InProcessDriver } from "../../engine/sandbox/in-process-driver.ts";
import type { HandleShape } from "../../engine/sandbox/sandbox.ts";
import { DEFAULT_LIMITS } from "../../engine/types.ts";
import { Vault } from "../fixtures/membrane/visibility-vault.ts";
import { TestMembrane } from "../sandbox/test-membrane.ts";

/*
 * The one visibility rule (engine/membrane/visibility.ts), seen from each place that applies it: for every member of
 * the fixture's Vault the prompt shows it ⇔ the compiler's declared members accept it ⇔ the host membrane serves it
 * ⇔ the isolate's proxy exposes it ⇔ the checker accepts a snippet reaching it. Each column is read from the real consumer, not from the rule.
 */

const VAULT_FILE = "test/fixtures/membrane/visibility-vault.ts";
const CONTEXT_FILE = "test/fixtures/membrane/visibility-context.ts";

/** Each declared member of Vault and whether model code may reach it. */
const TABLE: ReadonlyArray<readonly [string, boolean]> = [
  ["open", true],
  ["secretMethod", false], // private
  ["auditMethod", false], // protected
  ["_internalMethod", false],
  ["onInject", false],
  ["onDestroy", false],
  ["caller", false],
  ["callee", false],
  ["arguments", false],
];

describe("the visibility rule itself", () => {
  test("names: prototype plumbing, legacy function members, hooks, `_` and `#` are never reached", () => {
    for (const name of NEVER_REACHED_NAMES) expect(isReachableName(name)).toBe(false);
    for (const name of ["_x", "#x", "__proto__", "__anything"]) expect(isReachableName(name)).toBe(false);
    for (const name of ["open", "x_", "length", "then", "on"]) expect(isReachableName(name)).toBe(true);
    for (const name of ["", 1, null, undefined, Symbol("s")]) expect(isReachableName(name)).toBe(false);
  });

  test("modifiers: private and protected are hidden, whatever the name", () => {
    expect(isReachableMember({ name: "open" })).toBe(true);
    expect(isReachableMember({ name: "open", private: true })).toBe(false);
    expect(isReachableMember({ name: "open", protected: true })).toBe(false);
    expect(isReachableMember({ name: "_open" })).toBe(false);
  });

  test("the isolate half cannot be fooled by a patched String.prototype", () => {
    const startsWith = String.prototype.startsWith;
    try {
      String.prototype.startsWith = () => false;
      expect(isReachableName("_secret")).toBe(false);
    } finally {
      String.prototype.startsWith = startsWith;
    }
  });
});

describe("every consumer gives the same answer for the same member", () => {
  let runtime: MossRuntime;
  let prompt: string;
  let declared: Map<string, boolean>;
  let prompterHides: Map<string, boolean>;
  let isolateSees: Map<string, string>;
  const membrane = new HandleMembrane();
  let handle: number;
  let checker: ModuleChecker;

  beforeAll(async () => {
    const contextPath = path.resolve(CONTEXT_FILE);
    checker = new ModuleChecker({
      modulePath: contextPath,
      source: readFileSync(contextPath, "utf8"),
      hiddenNames: [],
    });
    runtime = await new MossCompiler({ sandbox: "in-process" })
      .bind("Vault", new Vault())
      .compile(CONTEXT_FILE);
    prompt = await runtime.prompter().dumpModulePrompt();

    const project = new Project({ compilerOptions: { strict: true, target: ts.ScriptTarget.ES2022 } });
    const file = project.addSourceFileAtPath(VAULT_FILE);
    const vault = file.getClassOrThrow("Vault");
    declared = new Map(
      vault
        .getType()
        .getProperties()
        .map((symbol) => [symbol.getName(), isPublicMember(symbol.compilerSymbol)]),
    );
    prompterHides = new Map(
      vault
        .getMembers()
        .map((member) => [(member as { getName(): string }).getName(), isNonPublicMember(member)]),
    );

    const names = TABLE.map(([name]) => name);
    const execution = await runtime.execute({
      code: `function main(moss: Moss) {
        const vault: any = moss.vault;
        const seen: Array<[string, string]> = [];
        for (const name of ${JSON.stringify([...names, "constructor", "prototype", "__proto__"])}) {
          seen.push([name, Object.prototype.hasOwnProperty.call(vault, name) ? typeof vault[name] : "absent"]);
        }
        return seen;
      }`,
      typeCheck: "off",
    });
    expect(execution.error).toBeUndefined();
    isolateSees = new Map(execution.returns as Array<[string, string]>);

    // The host membrane types the object by Vault's declaration, as the runtime does for a `moss` service field.
    const declaredType = new DeclaredTypes(project.getProgram().compilerObject).of(
      vault.getType().compilerType,
    );
    const wire = JSON.parse(membrane.encode(new Vault(), "vault", declaredType));
    handle = wire[0][1].id;
  });
  afterAll(async () => {
    await runtime?.close();
    await closeSharedSandboxes();
  });

  test.each(TABLE)("%s: reachable = %s", (name, reachable) => {
    // The prompt: the Vault declaration the model reads lists the member only when reachable.
    expect(prompt.includes(`${name}(`)).toBe(reachable);
    expect(prompterHides.get(name)).toBe(!reachable);
    // The compiler's declared members (what the host membrane and the checker's declared types accept).
    expect(declared.get(name)).toBe(reachable);
    // The host membrane serves a call of it on a host object of that class.
    const outcome = membrane.call(handle, name, encodeWire([]));
    expect(outcome.kind === "error" ? "refused" : "served").toBe(reachable ? "served" : "refused");
    // The isolate's proxy of the service exposes it.
    expect(isolateSees.get(name)).toBe(reachable ? "function" : "absent");
    // The checker accepts a snippet reaching it, by name or by a literal key, only when reachable; else it says so.
    for (const reach of [`moss.vault.${name}()`, `moss.vault[${JSON.stringify(name)}]()`]) {
      const diagnostics = checker.check(`function main(moss: Moss) {\n  return ${reach};\n}`);
      expect(diagnostics.length === 0, JSON.stringify(diagnostics)).toBe(reachable);
      expect(
        diagnostics.some((diagnostic) => diagnostic.code === MOSS_DIAGNOSTIC_CODES.unreachableMember),
      ).toBe(!reachable);
    }
  });

  test("prototype plumbing is on no proxy", () => {
    expect(isolateSees.get("constructor")).toBe("absent");
    expect(isolateSees.get("prototype")).toBe("absent");
    expect(isolateSees.get("__proto__")).toBe("absent");
  });

  test("a protected or private field of Moss is neither data nor reachable; a public one is", async () => {
    const execution = await runtime.execute({
      code: `function main(moss: Moss) {
        const open: any = moss;
        return [open.shown, typeof open.guarded, typeof open.hidden, typeof open._scratch];
      }`,
      typeCheck: "off",
    });
    expect(execution.error).toBeUndefined();
    expect(execution.returns).toEqual([1, "undefined", "undefined", "undefined"]);
    expect(Object.keys(execution.context?.properties ?? {})).toEqual(["shown"]);
  });
});

/** A host half that offers every name it is asked about: only the isolate's own rule stands between. */
class OverSharingMembrane extends TestMembrane {
  override shape(value: object): HandleShape {
    const shape = super.shape(value);
    const every = ["open", "constructor", "prototype", "__proto__", "_secret", "#hash"];
    for (const [name] of TABLE) every.push(name);
    return { ...shape, methods: every.filter((name) => name !== "__proto__"), properties: ["__proto__"] };
  }
}

test("the isolate half applies the rule itself: a host half offering more is not followed", async () => {
  const driver = new InProcessDriver();
  const membrane = new OverSharingMembrane();
  try {
    const session = await driver.open(
      membrane.setup({ vault: new Vault() }, {}, {}),
      membrane,
      DEFAULT_LIMITS,
    );
    const names = [
      ...TABLE.map(([name]) => name),
      "constructor",
      "prototype",
      "__proto__",
      "_secret",
      "#hash",
    ];
    const result = await session.run({
      script: `function main() {
        return ${JSON.stringify(names)}.filter((name) => Object.prototype.hasOwnProperty.call(vault, name));
      }`,
      filename: "snippet.js",
      target: "main",
      args: [],
      limits: DEFAULT_LIMITS,
    });
    expect(result.error).toBeUndefined();
    // Modifiers are the host's knowledge (the declared type); the isolate holds every name to the name rule.
    expect(decodeWire(result.returns ?? "")).toEqual(["open", "secretMethod", "auditMethod"]);
    expect(names.filter((name) => isReachableName(name))).toEqual(["open", "secretMethod", "auditMethod"]);
  } finally {
    await driver.close();
  }
});
