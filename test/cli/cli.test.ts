import { spawn } from "node:child_process";
import { watch } from "node:fs";
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";
import { EXIT, EXIT_CODES_HELP } from "../../engine/cli/exit-codes.ts";
import { main } from "../../engine/cli/main.ts";
import { decodeProperties } from "../../engine/context/index.ts";
import type { MossContext } from "../../engine/types.ts";
import { type CliResult, runMoss } from "../helpers/moss-cli.ts";

const SPHERO = "examples/sphero/context.ts";
const BIN = fileURLToPath(new URL("../../bin/moss.js", import.meta.url));
const IS_ROOT = process.getuid?.() === 0;

/** Runs the real `moss` binary in a child process, as a user would. */
function moss(args: string[], input?: string): Promise<CliResult> {
  return runMoss(args, input === undefined ? {} : { input });
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
    // The duration is the run's, not the save's.
    expect(first.stderr).toMatch(/^ran in \d+(\.\d)? ms; context saved to .*session\.json$/m);
    const second = await moss(["run", SPHERO, "--code", "-", "--context", contextFile], code);
    expect(second.stdout).toContain("turn 2");
    const saved = JSON.parse(await readFile(contextFile, "utf8")) as MossContext;
    expect(saved.version).toBe(2);
    expect(decodeProperties(saved.properties).turns).toBe(2);
  });

  test("run reports a runtime error with its snippet line and code frame and exits 1", async () => {
    const result = await moss(
      ["run", SPHERO, "--code", "-"],
      `async function main(moss: Moss) {\n  await moss.body.roll(0, 999, 1);\n}`,
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("error[runtime] at <stdin>:2:");
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
    expect(result.code).toBe(4);
    expect(result.stderr).toContain("context-corrupt");
    expect(result.stderr).toContain(contextFile);
    expect(await readFile(contextFile, "utf8")).toBe('{ "version": 1, "module": ');
  });

  test("run holds the context file for the whole run: a second run of the same file is refused, never a lost update", async () => {
    const directory = await mkdtemp(path.join(tmpdir(), "moss-cli-"));
    const contextFile = path.join(directory, "session.json");
    // Each run adds one turn and stays a while, so two runs started together overlap.
    const code = `async function main(moss: Moss) {\n  moss.turns += 1;\n  const start = Date.now();\n  while (Date.now() - start < 1000) {}\n  return moss.turns;\n}`;
    const results = await Promise.all([
      moss(["run", SPHERO, "--code", "-", "--context", contextFile], code),
      moss(["run", SPHERO, "--code", "-", "--context", contextFile], code),
    ]);
    const ran = results.filter((result) => result.code === 0).length;
    for (const refused of results.filter((result) => result.code !== 0)) {
      expect(refused.code).toBe(4);
      expect(refused.stderr).toContain("context-locked");
      expect(refused.stderr).toContain(`Context file ${contextFile} is locked by process`);
    }
    expect(ran).toBeGreaterThanOrEqual(1);
    // Every run that ran is in the file: without the lock both read 0 turns and the last save wrote 1.
    const saved = JSON.parse(await readFile(contextFile, "utf8")) as MossContext;
    expect(decodeProperties(saved.properties).turns).toBe(ran);
    expect(await readdir(directory)).toEqual(["session.json"]);
  });

  test("run refuses a context file a live process holds, leaves it untouched, and takes over a dead one's lock", async () => {
    const directory = await mkdtemp(path.join(tmpdir(), "moss-cli-"));
    const contextFile = path.join(directory, "session.json");
    const code = "async function main(moss: Moss) { moss.turns += 1; return moss.turns; }";
    expect((await moss(["run", SPHERO, "--code", "-", "--context", contextFile], code)).code).toBe(0);
    const before = await readFile(contextFile, "utf8");
    const owner = {
      pid: process.pid,
      hostname: hostname(),
      nonce: "test",
      acquiredAt: "2026-01-01T00:00:00.000Z",
    };
    await writeFile(`${contextFile}.lock`, JSON.stringify(owner), "utf8");
    const refused = await moss(["run", SPHERO, "--code", "-", "--context", contextFile], code);
    expect(refused.code).toBe(4);
    expect(refused.stderr).toContain(
      `error[context-locked]: Context file ${contextFile} is locked by process ${process.pid} on this host`,
    );
    expect(await readFile(contextFile, "utf8")).toBe(before);
    // A lock whose process is gone (a run that crashed) does not block the next run.
    await writeFile(`${contextFile}.lock`, JSON.stringify({ ...owner, pid: 2 ** 22 + 1 }), "utf8");
    const second = await moss(["run", SPHERO, "--code", "-", "--context", contextFile], code);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain("returned: 2");
    expect(await readdir(directory)).toEqual(["session.json"]);
  });

  test("run with the default process sandbox runs in the Node process the user started; --sandbox in-process starts one with --no-node-snapshot", async () => {
    // The run's host is the process holding the context file's lock (its pid is in the lock file while it runs).
    const hostOf = async (sandboxOptions: string[]): Promise<{ started: number; host: number }> => {
      const directory = await mkdtemp(path.join(tmpdir(), "moss-cli-"));
      const contextFile = path.join(directory, "session.json");
      const code =
        "async function main(moss: Moss) {\n  const start = Date.now();\n  while (Date.now() - start < 3000) {}\n  return 1;\n}";
      // As a user starts it: plain `node`, without --no-node-snapshot.
      const child = spawn(
        process.execPath,
        [BIN, "run", SPHERO, "--code", "-", "--context", contextFile, ...sandboxOptions],
        {
          env: { ...process.env, VITEST: "", NO_COLOR: "1" },
          stdio: ["pipe", "pipe", "pipe"],
        },
      );
      child.stdin.end(code);
      let stderr = "";
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
      const exited = new Promise<number | null>((resolve) =>
        child.on("exit", (exitCode) => resolve(exitCode)),
      );
      let exitCode: number | null | undefined;
      void exited.then((value) => (exitCode = value));
      let host: number | undefined;
      while (host === undefined && exitCode === undefined) {
        const lock = await readFile(`${contextFile}.lock`, "utf8").catch(() => undefined);
        if (lock !== undefined && lock.trim() !== "") host = (JSON.parse(lock) as { pid: number }).pid;
        else await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(await exited, stderr).toBe(0);
      expect(host, "the run ended before its lock was seen").toBeDefined();
      return { started: child.pid!, host: host! };
    };
    const plain = await hostOf([]);
    expect(plain.host).toBe(plain.started);
    const inProcess = await hostOf(["--sandbox", "in-process"]);
    expect(inProcess.host).not.toBe(inProcess.started);
  });

  test("a module importing a name its import does not export: the error names the import's line and column", async () => {
    const directory = await mkdtemp(path.join(tmpdir(), "moss-cli-"));
    await writeFile(path.join(directory, "package.json"), '{ "type": "module" }\n', "utf8");
    await writeFile(path.join(directory, "lib.ts"), "export const a = 1;\nexport default 2;\n", "utf8");
    await mkdir(path.join(directory, "node_modules"));
    await symlink(process.cwd(), path.join(directory, "node_modules", "moss-ts"));
    const module = path.join(directory, "context.ts");
    await writeFile(
      module,
      'import { Moss as Parent } from "moss-ts";\nimport { a, nothing } from "./lib.ts";\nexport class Moss extends Parent { n = a }\nexport const z = nothing;\n',
      "utf8",
    );
    const result = await moss(["prompt", module]);
    expect(result.code).toBe(4);
    // The type check finds it before the module is loaded.
    expect(result.stderr).toContain(
      `error[module-type-error]: ${module}:2:13 - error TS2614: Module '"./lib.ts"' has no exported member 'nothing'.`,
    );
    expect(result.stderr).toContain('> 2 | import { a, nothing } from "./lib.ts";');
    // Without moss-ts installed beside it, the import of "moss-ts" is the located cause (of a module that type-checks).
    await writeFile(
      module,
      'import { Moss as Parent } from "moss-ts";\nimport { a } from "./lib.ts";\nexport class Moss extends Parent { n = a }\n',
      "utf8",
    );
    await rm(path.join(directory, "node_modules"), { recursive: true });
    const unresolved = await moss(["prompt", module]);
    expect(unresolved.code).toBe(4);
    expect(unresolved.stderr).toContain(`${module}:1:32 - loading the context module failed`);
    expect(unresolved.stderr).toContain("Cannot find package 'moss-ts'");
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
    expect(option.code).toBe(2);
    expect(option.stderr).toContain("unknown option --jsn — did you mean --json?");
    const missing = await moss(["prompt", "examples/nope.ts"]);
    expect(missing.stderr).toContain("error[module-not-found]: examples/nope.ts: no such context module");
  });

  test("prompt, check, run and test work on a module in a read-only folder and create no file there", {
    timeout: 300_000,
  }, async () => {
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
      expect(tested.stdout).toContain("4 passed, 0 failed");
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
      'export class Greeter {\n  hello(name: string): string {\n    return "hi " + name;\n  }\n}\n',
    );
    const module = path.join(folder, "context.ts");
    await writeFile(
      module,
      'import { Moss as Parent } from "moss-ts";\nimport { Greeter } from "./services.ts";\nexport class Moss extends Parent {\n  greeter?: Greeter;\n}\n',
    );
    const result = await moss(["prompt", module]);
    // Node 22+ detects ES module syntax in such a file and loads it: there is then nothing to be told.
    const loadsAnyway = Number(process.versions.node.split(".")[0]) >= 22 && result.code === 0;
    if (loadsAnyway) {
      expect(result.stdout).toContain("class Moss extends Parent");
    } else {
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain(module);
      expect(result.stderr).toContain(`add "type": "module" to ${path.join(folder, "package.json")}`);
      expect(result.stderr).not.toMatch(/\.moss-\d+|in a cycle/);

      await rm(path.join(folder, "package.json"));
      const none = await moss(["prompt", module]);
      expect(none.stderr).toMatch(/no package\.json in .* or any folder above it/);
    }
    await rm(folder, { recursive: true, force: true });
  });

  test("a context file whose folder is a file: the run's output and result first, then an error naming the file; exit 4", async () => {
    const directory = await mkdtemp(path.join(tmpdir(), "moss-cli-"));
    const notAFolder = path.join(directory, "file.txt");
    await writeFile(notAFolder, "not a folder\n");
    const contextFile = path.join(notAFolder, "session.json");
    const result = await moss(
      ["run", SPHERO, "--code", "-", "--context", contextFile],
      'function main() {\n  console.log("did the work");\n  return 42;\n}',
    );
    expect(result.code).toBe(4);
    expect(result.stdout).toContain("did the work");
    expect(result.stdout).toContain("returned: 42");
    expect(result.stderr).toMatch(/^error\[context-write\]: /m);
    expect(result.stderr).toContain(contextFile);
    expect(result.stderr).toMatch(/ENOTDIR|EEXIST/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(await readFile(notAFolder, "utf8")).toBe("not a folder\n");
  });

  test.skipIf(IS_ROOT)(
    "a context file in a read-only folder: output first, a clear EACCES error, the old file survives",
    async () => {
      const directory = await mkdtemp(path.join(tmpdir(), "moss-cli-"));
      const contextFile = path.join(directory, "session.json");
      const code =
        'async function main(moss: Moss) {\n  moss.turns += 1;\n  console.log("turn", moss.turns);\n}';
      expect((await moss(["run", SPHERO, "--code", "-", "--context", contextFile], code)).code).toBe(0);
      const saved = await readFile(contextFile, "utf8");
      await chmod(directory, 0o555);
      try {
        const result = await moss(["run", SPHERO, "--code", "-", "--context", contextFile], code);
        expect(result.code).toBe(4);
        expect(result.stdout).toContain("turn 2");
        expect(result.stderr).toContain(
          `error[context-write]: ${contextFile}: cannot write the MossContext file (EACCES`,
        );
        expect(await readFile(contextFile, "utf8")).toBe(saved);
      } finally {
        await chmod(directory, 0o755);
      }
    },
  );
});

/** Runs the CLI's main() in this process with captured streams (no child process: the codes are the same). */
async function mainInProcess(
  args: string[],
  input: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const sink = (lines: string[]) =>
    new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
  const code = await main(args, {
    stdout: sink(stdout),
    stderr: sink(stderr),
    stdin: Readable.from([input]),
    env: { NO_COLOR: "1" },
    cwd: process.cwd(),
  });
  return { code, stdout: stdout.join(""), stderr: stderr.join("") };
}

describe("moss exit codes", () => {
  test("usage errors exit 2, failures 1, unusable inputs 4, the same for every command", async () => {
    const failing = "async function main(moss: Moss) {\n  await moss.body.roll(0, 999, 1);\n}";
    const untyped = "async function main(moss: Moss) {\n  moss.nothing();\n}";
    const cases: Array<[args: string[], input: string, code: number]> = [
      [[], "", 2],
      [["nope"], "", 2],
      [["check", SPHERO, "--code", "-", "--bogus"], "", 2],
      [["run", SPHERO], "", 2],
      [["check"], "", 2],
      [["run", SPHERO, "--code", "-", "--type-check", "sometimes"], "", 2],
      [["agent", SPHERO], "", 2],
      [["test"], "", 2],
      [["test", SPHERO, "--sandbox", "vm"], "", 2],
      [["check", SPHERO, "--code", "-"], untyped, 1],
      [["run", SPHERO, "--code", "-", "--sandbox", "in-process"], failing, 1],
      [["run", SPHERO, "--code", "-", "--sandbox", "in-process"], untyped, 1],
      [["prompt", "examples/nope.ts"], "", 4],
      [["check", "examples/nope.ts", "--code", "-"], "", 4],
      [["run", SPHERO, "--code", "no/such/code.ts"], "", 4],
      [["test", "examples/nope.ts"], "", 4],
    ];
    for (const [args, input, code] of cases) {
      const result = await mainInProcess(args, input);
      expect({ args, code: result.code }).toEqual({ args, code });
      if (code === 2) expect(result.stderr).toMatch(/Usage/);
      else expect(result.stderr).not.toMatch(/Usage/);
    }
  });

  test("--help documents every exit code, and the reference page carries the same table", async () => {
    const help = await moss(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain(EXIT_CODES_HELP);
    for (const code of Object.values(EXIT)) expect(EXIT_CODES_HELP).toMatch(new RegExp(`^  ${code} `, "m"));
    expect(await readFile("docs/10-reference.md", "utf8")).toContain(EXIT_CODES_HELP);
  });

  test("an unexpected error is an internal error: exit 70 with its stack", async () => {
    const stderr: string[] = [];
    const io = {
      stdout: new Writable({
        write() {
          throw new TypeError("stdout exploded");
        },
      }),
      stderr: new Writable({
        write(chunk, _encoding, done) {
          stderr.push(String(chunk));
          done();
        },
      }),
      stdin: Readable.from([]),
      env: {},
      cwd: process.cwd(),
    };
    expect(await main(["prompt", "--help"], io)).toBe(70);
    expect(stderr.join("")).toContain("internal error in moss-ts");
    expect(stderr.join("")).toContain("TypeError: stdout exploded");
  });
});
