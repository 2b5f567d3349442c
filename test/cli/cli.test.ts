import { execFile } from "node:child_process";
import { watch } from "node:fs";
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, test } from "vitest";

const SPHERO = "examples/sphero/context.ts";
const IS_ROOT = process.getuid?.() === 0;

/** Runs the real `moss` binary in a child process, as a user would. */
async function moss(
  args: string[],
  input?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = promisify(execFile)(process.execPath, ["--no-node-snapshot", "bin/moss.js", ...args], {
    env: { ...process.env, VITEST: "", NO_COLOR: "1" },
    maxBuffer: 16 * 1024 * 1024,
  });
  if (input !== undefined) {
    child.child.stdin?.end(input);
  }
  try {
    const { stdout, stderr } = await child;
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe("moss CLI", () => {
  test("prompt --json lists the attribute entries and a real token count", async () => {
    const result = await moss(["prompt", SPHERO, "--json"]);
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as {
      attributes: Array<{ name: string }>;
      prompt: string;
      tokens: number;
    };
    expect(report.attributes.map((entry) => entry.name)).toContain("Ball");
    expect(report.prompt).toContain("abstract class Ball");
    expect(Number.isInteger(report.tokens)).toBe(true);
    // o200k_base averages several characters per token on code; a character estimate would not match this range.
    expect(report.tokens).toBeGreaterThan(report.prompt.length / 8);
    expect(report.tokens).toBeLessThan(report.prompt.length / 2);
  });

  test("run executes code, prints stdout and the returned value, and keeps the context file between runs", async () => {
    const directory = await mkdtemp(path.join(tmpdir(), "moss-cli-"));
    const contextFile = path.join(directory, "session.json");
    const code = `async function main(moss: Moss) {\n  moss.turns += 1;\n  await polygon(moss.body, 4, 1);\n  console.log("turn", moss.turns);\n  return moss.body.history().length;\n}`;
    const first = await moss(["run", SPHERO, "--code", "-", "--context", contextFile], code);
    expect(first.stderr).not.toMatch(/error/);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain("turn 1");
    expect(first.stdout).toContain("returned: 4");
    const second = await moss(["run", SPHERO, "--code", "-", "--context", contextFile], code);
    expect(second.stdout).toContain("turn 2");
    const saved = JSON.parse(await readFile(contextFile, "utf8")) as {
      properties: { turns: { json: number } };
    };
    expect(saved.properties.turns.json).toBe(2);
  });

  test("run reports a runtime error with its snippet line and code frame and exits 1", async () => {
    const result = await moss(
      ["run", SPHERO, "--code", "-"],
      `async function main(moss: Moss) {\n  await moss.body.roll(0, 999, 1);\n}`,
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("error[runtime] at snippet.ts:2:");
    expect(result.stderr).toContain("speed must be between 0 and 255");
    expect(result.stderr).toContain("> 2 |   await moss.body.roll(0, 999, 1);");
    expect(result.stderr).not.toMatch(/\/work\/|simulated-bolt/);
  });

  test("run refuses a corrupt context file, names it, and leaves it untouched", async () => {
    const directory = await mkdtemp(path.join(tmpdir(), "moss-cli-"));
    const contextFile = path.join(directory, "broken.json");
    await writeFile(contextFile, '{ "version": 1, "module": ', "utf8");
    const result = await moss(
      ["run", SPHERO, "--code", "-", "--context", contextFile],
      "function main() { return 1; }",
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("context-corrupt");
    expect(result.stderr).toContain(contextFile);
    expect(await readFile(contextFile, "utf8")).toBe('{ "version": 1, "module": ');
  });

  test("check prints tsc-style diagnostics and exits 1; clean code exits 0", async () => {
    const broken = await moss(
      ["check", SPHERO, "--code", "-"],
      "async function main(moss: Moss) {\n  await moss.body.spn(90, 1);\n}",
    );
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain(
      "<stdin>:2:19 - error TS2551: Property 'spn' does not exist on type 'Ball'. Did you mean 'spin'?",
    );
    expect(broken.stdout).toContain("Found 1 error.");
    const clean = await moss(
      ["check", SPHERO, "--code", "-"],
      "async function main(moss: Moss) {\n  await moss.body.spin(90, 1);\n}",
    );
    expect(clean.code).toBe(0);
    expect(clean.stdout).toContain("No errors.");
  });

  test("a typo in a command or an option gets a clear message", async () => {
    const typo = await moss(["promt", SPHERO]);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('unknown command "promt" — did you mean "prompt"?');
    const option = await moss(["prompt", SPHERO, "--jsn"]);
    expect(option.code).toBe(1);
    expect(option.stderr).toContain("unknown option --jsn — did you mean --json?");
    const missing = await moss(["prompt", "examples/nope.ts"]);
    expect(missing.stderr).toContain("error[module-not-found]: examples/nope.ts: no such context module");
  });

  test("prompt, check, run and test work on a module in a read-only folder and create no file there", async () => {
    const folder = path.resolve("test/fixtures/.tmp", `read-only-cli-${process.pid}-${Date.now()}`);
    await mkdir(folder, { recursive: true });
    for (const name of ["context.ts", "bolt.ts", "simulated-bolt.ts"]) {
      await copyFile(path.join("examples/sphero", name), path.join(folder, name));
    }
    const module = path.join(folder, "context.ts");
    const before = await readdir(folder);
    const events: string[] = [];
    const watcher = watch(folder, (type, name) => events.push(`${type} ${name}`));
    if (!IS_ROOT) await chmod(folder, 0o555);
    try {
      const code = "async function main(moss: Moss) {\n  await moss.body.spin(90, 1);\n  return 1;\n}";
      const prompt = await moss(["prompt", module]);
      expect(prompt.stderr).toBe("");
      expect(prompt.stdout).toContain("abstract class Ball");
      const check = await moss(["check", module, "--code", "-"], code);
      expect(check.stdout).toContain("No errors.");
      const run = await moss(["run", module, "--code", "-"], code);
      expect(run.stderr).toBe("");
      expect(run.stdout).toContain("returned: 1");
      const tested = await moss(["test", module]);
      expect(tested.stdout).toContain("1 passed, 0 failed");
      expect([prompt.code, check.code, run.code, tested.code]).toEqual([0, 0, 0, 0]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(events).toEqual([]);
      expect(await readdir(folder)).toEqual(before);
    } finally {
      watcher.close();
      await chmod(folder, 0o755);
      await rm(folder, { recursive: true, force: true });
    }
  });

  test('a module outside an ES module package is told to add "type": "module" to the named package.json', async () => {
    const folder = await mkdtemp(path.join(tmpdir(), "moss-cjs-"));
    await writeFile(path.join(folder, "package.json"), '{ "name": "cjs-project" }\n');
    await mkdir(path.join(folder, "node_modules"));
    await symlink(path.resolve("."), path.join(folder, "node_modules", "moss-ts"));
    await writeFile(
      path.join(folder, "services.ts"),
      "export class Greeter {\n  hello(name: string): string {\n    return \"hi \" + name;\n  }\n}\n",
    );
    const module = path.join(folder, "context.ts");
    await writeFile(
      module,
      'import { Moss as Parent } from "moss-ts";\nimport { Greeter } from "./services.ts";\nexport class Moss extends Parent {\n  greeter?: Greeter;\n}\n',
    );
    const result = await moss(["prompt", module]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(module);
    expect(result.stderr).toContain(`add "type": "module" to ${path.join(folder, "package.json")}`);
    expect(result.stderr).not.toMatch(/\.moss-\d+|in a cycle/);

    await rm(path.join(folder, "package.json"));
    const none = await moss(["prompt", module]);
    expect(none.stderr).toMatch(/no package\.json in .* or any folder above it/);
    await rm(folder, { recursive: true, force: true });
  });
});
