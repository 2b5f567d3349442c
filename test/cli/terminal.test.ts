import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { promisify } from "node:util";
import { describe, expect, test } from "vitest";
import { main } from "../../engine/cli/main.ts";
import { colourEnabled, SPINNER_DELAY_MS, spinnerEnabled, Terminal } from "../../engine/cli/terminal.ts";

const SPHERO = "examples/sphero/context.ts";
const TYPO = "async function main(moss: Moss) {\n  await moss.body.spn(90, 1);\n}\n";
const ESCAPE = "\x1b[";

/** A stream that records what is written, optionally claiming to be a TTY; `onWrite` sees each chunk. */
function recorder(isTTY: boolean, onWrite: (text: string) => void = () => {}) {
  const chunks: string[] = [];
  const stream: Writable & { isTTY: boolean } = Object.assign(
    new Writable({
      write(chunk, _encoding, done) {
        chunks.push(String(chunk));
        onWrite(chunks.join(""));
        done();
      },
    }),
    {
      isTTY,
      columns: 80,
      // What a tty.WriteStream offers a spinner to redraw its line.
      cursorTo: (_x: number, callback?: () => void) => stream.write("\r", callback),
      clearLine: (_direction: number, callback?: () => void) => stream.write("\x1b[2K", callback),
      moveCursor: (_dx: number, _dy: number, callback?: () => void) => callback?.() ?? true,
    },
  );
  return { stream, text: () => chunks.join("") };
}

async function runMain(args: string[], input: string, env: NodeJS.ProcessEnv, isTTY = false) {
  const stdout = recorder(isTTY);
  const stderr = recorder(isTTY);
  const code = await main(args, {
    stdout: stdout.stream,
    stderr: stderr.stream,
    stdin: Readable.from([input]),
    env,
    cwd: process.cwd(),
  });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

describe("colour and spinner decisions", () => {
  test("colour: FORCE_COLOR forces it, NO_COLOR turns it off, otherwise only a TTY that is not dumb", () => {
    expect(colourEnabled({ isTTY: true }, {})).toBe(true);
    expect(colourEnabled({ isTTY: false }, {})).toBe(false);
    expect(colourEnabled({}, {})).toBe(false);
    expect(colourEnabled({ isTTY: true }, { NO_COLOR: "1" })).toBe(false);
    expect(colourEnabled({ isTTY: true }, { NO_COLOR: "" })).toBe(true);
    expect(colourEnabled({ isTTY: true }, { TERM: "dumb" })).toBe(false);
    expect(colourEnabled({ isTTY: false }, { FORCE_COLOR: "1" })).toBe(true);
    expect(colourEnabled({ isTTY: true }, { FORCE_COLOR: "0" })).toBe(false);
    expect(colourEnabled({ isTTY: false }, { FORCE_COLOR: "1", NO_COLOR: "1" })).toBe(true);
  });

  test("spinner: only on a TTY, never under CI or TERM=dumb", () => {
    expect(spinnerEnabled({ isTTY: true }, {})).toBe(true);
    expect(spinnerEnabled({ isTTY: false }, {})).toBe(false);
    expect(spinnerEnabled({ isTTY: true }, { CI: "true" })).toBe(false);
    expect(spinnerEnabled({ isTTY: true }, { CI: "" })).toBe(false);
    expect(spinnerEnabled({ isTTY: true }, { TERM: "dumb" })).toBe(false);
  });

  test("a slow step shows a spinner with its name on a TTY, and clears it when done", async () => {
    let sawName: () => void = () => {};
    const shown = new Promise<void>((resolve) => {
      sawName = resolve;
    });
    const stderr = recorder(true, (text) => {
      if (text.includes("compiling the module")) sawName();
    });
    const terminal = new Terminal({
      stdout: recorder(true).stream,
      stderr: stderr.stream,
      stdin: Readable.from([]),
      env: {},
      cwd: process.cwd(),
    });
    // The step ends only once its spinner has been drawn: no dependence on how fast the machine is.
    expect(await terminal.step("compiling the module", () => shown.then(() => 42))).toBe(42);
    expect(stderr.text()).toContain("compiling the module");
  });

  test("a quick step shows nothing; no spinner off a TTY or under CI however slow the step", async () => {
    const io = (isTTY: boolean, env: NodeJS.ProcessEnv) => {
      const stderr = recorder(isTTY);
      const terminal = new Terminal({
        stdout: recorder(isTTY).stream,
        stderr: stderr.stream,
        stdin: Readable.from([]),
        env,
        cwd: process.cwd(),
      });
      return { terminal, stderr };
    };
    const quick = io(true, {});
    await quick.terminal.step("quick", async () => 1);
    const piped = io(false, {});
    const ci = io(true, { CI: "1" });
    const slow = () => new Promise((resolve) => setTimeout(resolve, SPINNER_DELAY_MS * 2));
    await Promise.all([piped.terminal.step("slow", slow), ci.terminal.step("slow", slow)]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect([quick.stderr.text(), piped.stderr.text(), ci.stderr.text()]).toEqual(["", "", ""]);
  });
});

describe("diagnostics: coloured like tsc --pretty, the code file named alike by check and run", () => {
  test("FORCE_COLOR colours location, severity, code and caret; NO_COLOR and pipes stay plain", async () => {
    const coloured = await runMain(["check", SPHERO, "--code", "-"], TYPO, { FORCE_COLOR: "1" });
    expect(coloured.code).toBe(1);
    expect(coloured.stdout).toContain("\x1b[36m<stdin>\x1b[39m:\x1b[33m2\x1b[39m:\x1b[33m19\x1b[39m");
    expect(coloured.stdout).toContain("\x1b[31merror\x1b[39m \x1b[90mTS2551:\x1b[39m Property 'spn'");
    expect(coloured.stdout).toContain("\x1b[31m^\x1b[39m");

    const noColor = await runMain(["check", SPHERO, "--code", "-"], TYPO, { NO_COLOR: "1" }, true);
    const piped = await runMain(["check", SPHERO, "--code", "-"], TYPO, {});
    for (const plain of [noColor, piped]) {
      expect(plain.stdout).not.toContain(ESCAPE);
      expect(plain.stdout).toContain("<stdin>:2:19 - error TS2551:");
    }
  });

  test("check and run name the code file the same way: <stdin> for -, the path for a file", async () => {
    const file = path.join("test", "fixtures", "cli", "typo-snippet.txt");
    const check = await runMain(["check", SPHERO, "--code", "-"], TYPO, {});
    const run = await runMain(["run", SPHERO, "--code", "-", "--sandbox", "in-process"], TYPO, {});
    expect(check.stdout).toContain("<stdin>:2:19 - error TS2551");
    expect(run.stderr).toContain("<stdin>:2:19 - error TS2551");
    expect(run.stderr).not.toContain("snippet.ts");

    const runtime = await runMain(
      ["run", SPHERO, "--code", "-", "--sandbox", "in-process"],
      "async function main(moss: Moss) {\n  await moss.body.roll(0, 999, 1);\n}",
      {},
    );
    expect(runtime.stderr).toContain("error[runtime] at <stdin>:2:");
    expect(runtime.stderr).not.toContain("snippet.ts");

    const checkFile = await runMain(["check", SPHERO, "--code", file], "", {});
    const runFile = await runMain(["run", SPHERO, "--code", file, "--sandbox", "in-process"], "", {});
    expect(checkFile.stdout).toContain(`${file}:2:19 - error TS2551`);
    expect(runFile.stderr).toContain(`${file}:2:19 - error TS2551`);
  });

  test("a pseudo-terminal gets colour without FORCE_COLOR; NO_COLOR and CI keep it plain and spinner-free", async () => {
    const command = (env: string) =>
      `${env} ${process.execPath} --no-node-snapshot bin/moss.js check ${SPHERO} --code test/fixtures/cli/typo-snippet.txt`;
    const script = async (env: string) => {
      const { stdout } = await promisify(execFile)("script", ["-qec", command(env), "/dev/null"], {
        env: { ...process.env, VITEST: "", NO_COLOR: "", FORCE_COLOR: "", CI: "" },
      }).catch((error: { stdout: string }) => error);
      return stdout;
    };
    const [tty, noColor] = await Promise.all([
      script("env -u NO_COLOR -u FORCE_COLOR -u CI"),
      script("env -u FORCE_COLOR CI=1 NO_COLOR=1"),
    ]);
    expect(tty).toContain("\x1b[36mtest/fixtures/cli/typo-snippet.txt\x1b[39m");
    expect(noColor).toContain("test/fixtures/cli/typo-snippet.txt:2:19 - error TS2551");
    expect(noColor).not.toContain(ESCAPE);
    expect(noColor).not.toContain("loading");
  });
});

describe("startup stays light", () => {
  /** Packages a module pulls in through its static (non-type) imports, following relative imports. */
  function staticPackages(file: string, seen = new Set<string>()): Set<string> {
    const packages = new Set<string>();
    if (seen.has(file)) return packages;
    seen.add(file);
    const source = readFileSync(file, "utf8");
    const pattern = /^(?:import|export)\s+(?!type\b)(?:[^;"']*?\sfrom\s+)?["']([^"']+)["']/gm;
    for (const match of source.matchAll(pattern)) {
      const specifier = match[1]!;
      if (specifier.startsWith(".")) {
        for (const found of staticPackages(path.resolve(path.dirname(file), specifier), seen))
          packages.add(found);
      } else if (!specifier.startsWith("node:")) {
        packages.add(
          specifier.startsWith("@") ? specifier.split("/").slice(0, 2).join("/") : specifier.split("/")[0]!,
        );
      }
    }
    return packages;
  }

  test("main and every command's --help path load none of ts-morph, esbuild, tsx, isolated-vm, openai", () => {
    const heavy = ["ts-morph", "esbuild", "tsx", "isolated-vm", "openai", "typescript"];
    const files = ["main", "prompt-command", "check-command", "run-command", "agent-command", "test-command"];
    for (const name of files) {
      const packages = [...staticPackages(path.resolve("engine/cli", `${name}.ts`))];
      expect({ name, heavy: packages.filter((entry) => heavy.includes(entry)) }).toEqual({ name, heavy: [] });
    }
  });
});
