// Imports between moss-ts's own declarations (the surface a context module's `import … from "moss-ts"` reads) are
// resolved once per process: they cannot change while it runs, and every new program of a module re-resolved them
// (25–30 ms a program). A module's own imports are still resolved afresh each time (module-project.ts).
import fs, { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { readCheckedModule } from "../../engine/module/index.ts";
import { moduleSurfaceFolders } from "../../engine/module-surface.ts";

const folder = mkdtempSync(path.join(tmpdir(), "moss-surface-resolution-"));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

function readModule(name: string, extra = ""): void {
  const file = path.join(folder, name, "context.ts");
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const source = `import { Moss as Parent, type MossCompiler } from "moss-ts";\n${extra}export class Moss extends Parent {\n  turns = 0;\n}\nexport type Compiler = MossCompiler;\n`;
  writeFileSync(file, source);
  readCheckedModule(file, source, "context.ts");
}

describe("module projects: resolution of moss-ts's own declarations", () => {
  it("probes no file of the surface to resolve its imports again in a later program; a module's own imports still are", () => {
    readModule("first");
    const surface = moduleSurfaceFolders();
    const touched: string[] = [];
    const ownImports: string[] = [];
    const watch = (name: "statSync" | "existsSync") => {
      const original = fs[name] as (...args: unknown[]) => unknown;
      return vi.spyOn(fs, name).mockImplementation(((...args: unknown[]) => {
        const target = String(args[0]);
        if (surface.some((root) => target.startsWith(root))) touched.push(target);
        if (target.startsWith(folder)) ownImports.push(target);
        return original(...args);
      }) as never);
    };
    const spies = [watch("statSync"), watch("existsSync")];
    try {
      writeFileSync(path.join(folder, "second-helper.ts"), "export const helper = 1;\n");
      readModule("second", 'import { helper } from "../second-helper.ts";\nvoid helper;\n');
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
    // TypeScript still looks up each file's package scope (package.json) for its module format, per program: no
    // candidate of an import is probed again.
    expect(touched.filter((file) => path.basename(file) !== "package.json")).toEqual([]);
    expect(ownImports.some((file) => file.endsWith("second-helper.ts"))).toBe(true);
  });
});
