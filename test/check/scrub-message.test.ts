import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { scrubMessage } from "../../engine/check/scrub-message.ts";

const MODULE_DIRECTORY = path.join(os.tmpdir(), "données privées", "robot");

function scrub(message: string, hiddenNames: string[] = [], shownNames: string[] = []): string {
  return scrubMessage(message, {
    moduleDirectory: MODULE_DIRECTORY,
    virtualFiles: [[path.join(MODULE_DIRECTORY, ".context.moss-check-1-ab-scope.ts"), "context.ts"]],
    hiddenNames: new Set(hiddenNames),
    shownNames: new Set(shownNames),
  });
}

describe("scrubMessage", () => {
  it("shows a path in the module's folder as the module-relative specifier, whatever the folder names", () => {
    const message = `Type 'typeof import("${MODULE_DIRECTORY}/bolt")' is not assignable to type 'number'.`;
    expect(scrub(message)).toBe(`Type 'typeof import("./bolt")' is not assignable to type 'number'.`);
  });

  it("shows a package file as its package path, and other host paths by file name only", () => {
    const message = `Type 'typeof import("/usr/lib/node_modules/left-pad/index")' and '${os.homedir()}/notes/plan.ts' and ${process.cwd()}/src/a.ts.`;
    const shown = scrub(message);
    expect(shown).toContain('import("left-pad/index")');
    expect(shown).not.toContain(os.homedir() === "/" ? "/notes" : os.homedir());
    expect(shown).not.toContain(process.cwd());
    expect(shown).toContain("plan.ts");
  });

  it("names the checker's own files after the context module", () => {
    const message = `Module '"${MODULE_DIRECTORY}/.context.moss-check-1-ab-scope"' has no exported member 'x'.`;
    expect(scrub(message)).toBe(`Module '"context.ts"' has no exported member 'x'.`);
  });

  it("replaces hidden names the model has not seen inside quoted types, and keeps the ones it has", () => {
    const message = "Type 'SecretShape' is not assignable to type 'Shown'. Did you mean 'SecretShape'?";
    expect(scrub(message, ["SecretShape"])).toBe(
      "Type '(hidden)' is not assignable to type 'Shown'. Did you mean '(hidden)'?",
    );
    expect(scrub(message, ["SecretShape"], ["SecretShape"])).toBe(message);
  });

  it("drops hints about the checker's compiler options", () => {
    expect(
      scrub(
        "Cannot find name 'document'. Do you need to change your target library? Try changing the 'lib' compiler option to include 'dom'.",
      ),
    ).toBe("Cannot find name 'document'.");
    expect(
      scrub(
        "Cannot find name 'process'. Do you need to install type definitions for node? Try `npm i --save-dev @types/node`.",
      ),
    ).toBe("Cannot find name 'process'.");
  });

  it("keeps the model's own string literal types that look like paths", () => {
    const message = `Type '"/api/health"' is not assignable to type '"/api/status"'.`;
    expect(scrub(message)).toBe(message);
  });
});
