import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, test } from "vitest";
import { runNodeScript, type ScriptResult } from "../helpers/node-script.ts";

/*
 * Issue 12, item 1: a plain Node script that follows the README's API flow (compile → execute → save → close)
 * ends by itself. Each case runs a real `node` child that loads the engine through tsx and must exit on its own:
 * if anything it used stayed referenced (a sandbox process, a pipe, a timer) the child would never exit and the
 * test's bound kills it.
 */

const ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const folder = mkdtempSync(path.join(tmpdir(), "moss-clean-exit-"));
/** Generous: the bound only tells "exited by itself" from "never exits" on a loaded machine. */
const EXIT_BOUND_MS = 90_000;

afterAll(() => rmSync(folder, { recursive: true, force: true }));

function script(options: {
  sandbox: "process" | "in-process";
  ending: "close" | "none" | "await-using";
}): string {
  const engine = JSON.stringify(path.join(ROOT, "engine/index.ts"));
  const vault = JSON.stringify(path.join(ROOT, "test/fixtures/security/vault.ts"));
  const modulePath = JSON.stringify(path.join(ROOT, "test/fixtures/security/context.ts"));
  const compile = `new MossCompiler({ sandbox: ${JSON.stringify(options.sandbox)} }).bind(Vault, new Vault()).compile(${modulePath})`;
  const work = `
    const execution = await runtime.execute({
      code: "async function main(moss: Moss) { moss.counter++; return [moss.vault.read('k'), await moss.vault.fetch('f')]; }",
    });
    if (!execution.ok) {
      console.error(JSON.stringify(execution.error));
      process.exit(3);
    }
    await new FileContextStore(${JSON.stringify(folder)}).save("session-1", runtime.dumpContext());
    console.log(JSON.stringify(execution.returns));`;
  const body =
    options.ending === "await-using"
      ? `{\n  await using runtime = await ${compile};\n${work}\n}`
      : `const runtime = await ${compile};\n${work}\n${options.ending === "close" ? "await runtime.close();" : ""}`;
  return `import { FileContextStore, MossCompiler } from ${engine};\nimport { Vault } from ${vault};\n${body}\nconsole.log("done");\n`;
}

function runScript(source: string, name: string): Promise<ScriptResult> {
  return runNodeScript(path.join(folder, `${name}.mts`), source, { cwd: ROOT, killAfterMs: EXIT_BOUND_MS });
}

describe("a script using moss-ts ends by itself", () => {
  test.each([
    ["process", "close"],
    ["process", "none"],
    ["process", "await-using"],
    ["in-process", "close"],
  ] as const)(
    "%s driver, ending with %s",
    async (sandbox, ending) => {
      const result = await runScript(script({ sandbox, ending }), `${sandbox}-${ending}`);
      expect(result.stderr).not.toMatch(/Error/);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toBe('["value of k","fetched f"]\ndone\n');
    },
    EXIT_BOUND_MS + 10_000,
  );
});
