import { mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { readCheckedModule } from "../../engine/module/module-type-check.ts";
import { moduleDeclarations } from "../../engine/runtime/declared-members.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { FIXTURES } from "../helpers/compile-from-text.ts";

// Runtimes of one module share the resolution of its declared types (issue 17: a session's open costs no type
// resolution that another session of the module already did). What a handle offers must still follow the
// declarations each runtime was compiled from: never another module's, never a stale version of an imported file.

const DIRECTORY = path.join(FIXTURES, ".tmp", `declarations-${process.pid}`);
const TYPES_FILE = path.join(DIRECTORY, "vault-types.ts");
const MODULE_FILE = path.join(DIRECTORY, "vault-context.ts");

const MODULE = `import { Moss as Parent } from "moss-ts";
import type { Vault } from "./vault-types.ts";

export class Moss extends Parent {
  vault!: Vault;
}

// <moss-hide>
export const secretsRead: string[] = [];
class HostVault {
  open() { return "opened"; }
  secret() { secretsRead.push("secret"); return "the secret"; }
}
export function __moss_compile__(compiler: { bind(token: unknown, value: unknown): unknown }) {
  compiler.bind("Vault", new HostVault());
}
// </moss-hide>
`;

const WIDE = "export interface Vault {\n  open(): string;\n  secret(): string;\n}\n";
const NARROW = "export interface Vault {\n  open(): string;\n}\n";

const open: MossRuntime[] = [];

async function compile(): Promise<MossRuntime> {
  const runtime = await new MossCompiler({ sandbox: "in-process", typeCheck: "off" }).compile(
    path.relative(process.cwd(), MODULE_FILE),
  );
  open.push(runtime);
  return runtime;
}

afterAll(async () => {
  await Promise.all(open.splice(0).map((runtime) => runtime.close()));
  await rm(DIRECTORY, { recursive: true, force: true });
});

describe("declared types shared by the runtimes of a module", () => {
  test("two analyses of the same module text and imports share one resolution; another path does not", async () => {
    await mkdir(DIRECTORY, { recursive: true });
    await writeFile(TYPES_FILE, WIDE, "utf8");
    await writeFile(MODULE_FILE, MODULE, "utf8");
    const other = path.join(DIRECTORY, "vault-context-copy.ts");
    await writeFile(other, MODULE, "utf8");
    const first = readCheckedModule(MODULE_FILE, MODULE, "vault-context.ts").analysis;
    const second = readCheckedModule(MODULE_FILE, MODULE, "vault-context.ts").analysis;
    const copy = readCheckedModule(other, MODULE, "vault-context-copy.ts").analysis;
    expect(second.declaredTypes.program).not.toBe(first.declaredTypes.program);
    expect(moduleDeclarations(second.declaredTypes)).toBe(moduleDeclarations(first.declaredTypes));
    expect(moduleDeclarations(copy.declaredTypes)).not.toBe(moduleDeclarations(first.declaredTypes));
    await writeFile(TYPES_FILE, NARROW, "utf8");
    const edited = readCheckedModule(MODULE_FILE, MODULE, "vault-context.ts").analysis;
    expect(moduleDeclarations(edited.declaredTypes)).not.toBe(moduleDeclarations(first.declaredTypes));
  });

  test("a member removed from an imported declaration is out of reach for the next session, not only the first", async () => {
    await mkdir(DIRECTORY, { recursive: true });
    await writeFile(TYPES_FILE, WIDE, "utf8");
    await writeFile(MODULE_FILE, MODULE, "utf8");
    const wide = await compile();
    const read = await wide.execute({ code: "function main(moss: Moss) { return moss.vault.secret(); }" });
    expect(read).toMatchObject({ ok: true, returns: "the secret" });

    // The module's own text is unchanged: only the file it imports its declaration from narrows the interface.
    await writeFile(TYPES_FILE, NARROW, "utf8");
    const narrow = await compile();
    const opened = await narrow.execute({ code: "function main(moss: Moss) { return moss.vault.open(); }" });
    expect(opened).toMatchObject({ ok: true, returns: "opened" });
    const refused = await narrow.execute({
      code: "function main(moss: any) { return moss.vault.secret(); }",
    });
    expect(refused.ok).toBe(false);

    // The first session keeps the declarations it was compiled from.
    const again = await wide.execute({ code: "function main(moss: Moss) { return moss.vault.secret(); }" });
    expect(again).toMatchObject({ ok: true, returns: "the secret" });
  });
});
