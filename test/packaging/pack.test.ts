import { execFile, spawn } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isRunning } from "../helpers/descendants.ts";

/*
 * The package as a new user gets it: `npm pack` (which builds dist/ on prepack), the tarball installed into a
 * fresh ESM project with no @types/node and no TypeScript loader, then plain `node` and a strict `tsc` there.
 *
 * Install scripts are skipped in the temporary project (`--ignore-scripts`): a source build of isolated-vm costs
 * minutes. The native addon is copied in from this checkout's install of the same isolated-vm version, which is
 * exactly what its install script builds; `.ci/run` proves the install scripts themselves with a plain
 * `npm install` on every Node line. Skipped (with the reason) only when the npm registry cannot be reached.
 */

const root = fileURLToPath(new URL("../..", import.meta.url));
const run = promisify(execFile);
const SETUP_TIMEOUT_MS = 240_000;
/** Generous: a run that hangs is killed at 90 s and reported as such, never as a vitest timeout. */
const RUN_TIMEOUT_MS = 200_000;
/** Installing vitest into a second project, then its run. */
const VITEST_TIMEOUT_MS = 600_000;

interface PackResult {
  filename: string;
  size: number;
  unpackedSize: number;
  entryCount: number;
  files: Array<{ path: string }>;
}

let work = "";
let project = "";
let pack: PackResult | undefined;
let skipReason: string | undefined;

/**
 * The environment of a user's shell: none of vitest's variables, no loader or flag in NODE_OPTIONS. Without the
 * warm path (`MOSS_NO_DAEMON=1`) unless a test asks for it: a daemon would outlive the test.
 */
function userEnv(extra: NodeJS.ProcessEnv = { MOSS_NO_DAEMON: "1" }): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (name.startsWith("VITEST") || name === "NODE_OPTIONS" || name === "TEST" || name === "NODE_ENV")
      continue;
    if (name === "MOSS_NO_DAEMON") continue;
    env[name] = value;
  }
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

async function npm(args: string[], cwd: string, timeout = 120_000): Promise<string> {
  const { stdout } = await run("npm", args, { cwd, env: userEnv(), timeout, maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/** Runs plain `node` (no flags) in the project (or `cwd`); resolves with how it ended instead of throwing. */
function node(
  args: string[],
  options: { stdin?: string; timeoutMs?: number; cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: options.cwd ?? project, env: userEnv(options.env) });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.stdin.end(options.stdin ?? "");
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, options.timeoutMs ?? 60_000);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}

/** Copies the built native addon of each installed isolated-vm alias from this checkout's install of that version. */
function provideNativeAddons(into = project): void {
  const installed = (folder: string) =>
    existsSync(folder)
      ? readdirSync(folder).filter((name) => name === "isolated-vm" || name.startsWith("isolated-vm-"))
      : [];
  const version = (folder: string) =>
    JSON.parse(readFileSync(path.join(folder, "package.json"), "utf8")).version;
  const ours = installed(path.join(root, "node_modules")).map((name) =>
    path.join(root, "node_modules", name),
  );
  for (const name of installed(path.join(into, "node_modules"))) {
    const target = path.join(into, "node_modules", name);
    const source = ours.find((folder) => version(folder) === version(target));
    if (!source) continue;
    for (const output of ["out", "build"]) {
      if (existsSync(path.join(source, output)))
        cpSync(path.join(source, output), path.join(target, output), { recursive: true });
    }
  }
}

beforeAll(async () => {
  try {
    await npm(["ping"], root, 20_000);
  } catch (error) {
    skipReason = `the npm registry is unreachable (npm ping: ${(error as Error).message.split("\n")[0]})`;
    return;
  }
  work = mkdtempSync(path.join(tmpdir(), "moss-ts-pack-"));
  // prepack builds dist/: the tarball always carries a fresh build.
  [pack] = JSON.parse(
    await npm(["pack", "--json", "--pack-destination", work], root, 180_000),
  ) as PackResult[];
  project = path.join(work, "app");
  cpSync(path.join(root, "test/packaging/consumer"), project, { recursive: true });
  await npm(
    [
      "install",
      "--ignore-scripts",
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
      path.join(work, pack!.filename),
    ],
    project,
    180_000,
  );
  provideNativeAddons();
}, SETUP_TIMEOUT_MS);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the published package", () => {
  it("ships only what a user needs: built JavaScript, declarations and maps, sources for the maps, the CLI", ({
    skip,
  }) => {
    if (skipReason) return skip(skipReason);
    const files = pack!.files.map((file) => file.path);
    console.log(
      `npm pack: ${pack!.entryCount} files, ${pack!.size} bytes packed, ${pack!.unpackedSize} bytes unpacked`,
    );
    const unwanted = files.filter(
      (file) =>
        /^(test|bench|examples|scripts|\.ci|coverage|\.moss)\//.test(file) ||
        /(^|\/)(tsconfig[^/]*\.json|vitest\.config\.[^/]+|biome\.json|package-lock\.json|\.gitignore|\.npmrc)$/.test(
          file,
        ) ||
        /\.(test|bench)\.[cm]?[jt]s$/.test(file),
    );
    expect(unwanted).toEqual([]);
    for (const expected of [
      "package.json",
      "README.md",
      "docs/01-getting-started.md",
      "bin/moss.js",
      "dist/engine/index.js",
      "dist/engine/index.d.ts",
      "dist/engine/index.d.ts.map",
      "dist/container/index.js",
      "dist/container/index.d.ts",
      "dist/engine/cli/main.js",
      "dist/engine/sandbox/sandbox-process.js",
      "engine/index.ts",
    ]) {
      expect(files).toContain(expected);
    }
    // Every target of `exports` and `bin` is in the tarball.
    const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
    const targets = [
      ...Object.values(manifest.bin as Record<string, string>),
      ...Object.values(manifest.exports as Record<string, string | Record<string, string>>).flatMap(
        (target) => (typeof target === "string" ? [target] : Object.values(target)),
      ),
    ];
    for (const target of targets) expect(files).toContain(path.posix.normalize(target));
  });

  it("ships every file the built code opens relative to its own location", ({ skip }) => {
    if (skipReason) return skip(skipReason);
    const files = new Set(pack!.files.map((file) => file.path));
    const missing: string[] = [];
    for (const file of files) {
      if (!file.startsWith("dist/") || !file.endsWith(".js")) continue;
      const text = readFileSync(path.join(project, "node_modules/moss-ts", file), "utf8");
      for (const [, argument] of text.matchAll(/new URL\(([^;]*?)import\.meta\.url\s*\)/gs)) {
        for (const [, literal] of argument!.matchAll(/["'](\.{1,2}\/[^"']+)["']/g)) {
          if (/\.[cm]?ts$/.test(literal!) && !literal!.endsWith(".d.ts")) continue; // the source-checkout branch
          const target = path.posix.join(path.posix.dirname(file), literal!);
          if (!files.has(target) && !files.has(`${target.replace(/\/$/, "")}/package.json`))
            missing.push(`${file}: ${literal}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  // One run of the user's script (app.mjs) serves the three checks below.
  let script: ReturnType<typeof node> | undefined;
  const runScript = () => (script ??= node(["app.mjs"], { timeoutMs: 90_000 }));
  const executions = async () => {
    const result = await runScript();
    const last = result.stdout.trim().split("\n").at(-1) ?? "";
    expect(last, `app.mjs printed no result; stderr: ${result.stderr}`).toMatch(/^\{/);
    return JSON.parse(last) as Record<"plain" | "logged", Record<string, unknown>>;
  };

  it(
    "compiles a context module and runs the model's code from plain node",
    async ({ skip }) => {
      if (skipReason) return skip(skipReason);
      expect((await executions()).plain).toEqual({ ok: true, returns: "hello, ada", stdout: "" });
    },
    RUN_TIMEOUT_MS,
  );

  it(
    "type-checks and runs code that uses console.log (globals come from moss-ts, not the user's @types)",
    async ({ skip }) => {
      if (skipReason) return skip(skipReason);
      expect((await executions()).logged).toEqual({ ok: true, returns: 1, stdout: "hello, bob\n" });
    },
    RUN_TIMEOUT_MS,
  );

  it(
    "ends by itself when its work is done (no close of the runtime or the shared sandboxes)",
    async ({ skip }) => {
      if (skipReason) return skip(skipReason);
      const result = await runScript();
      expect(result.timedOut, `still running after 90 s; stderr: ${result.stderr}`).toBe(false);
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
    },
    RUN_TIMEOUT_MS,
  );

  it(
    "runs the moss CLI from the installed package with plain node",
    async ({ skip }) => {
      if (skipReason) return skip(skipReason);
      const prompt = await node(["node_modules/moss-ts/bin/moss.js", "prompt", "context.ts"]);
      expect(prompt.stderr).toBe("");
      expect(prompt.code).toBe(0);
      expect(prompt.stdout).toContain("export function hello(name: string): string");

      const ran = await node(["node_modules/.bin/moss", "run", "context.ts", "--code", "-"], {
        stdin: 'async function main(moss: Moss) { return hello("bob") }',
        timeoutMs: 90_000,
      });
      expect(ran.stderr).toBe("");
      expect(ran.code).toBe(0);
      expect(ran.stdout).toContain("hello, bob");
    },
    RUN_TIMEOUT_MS,
  );

  it(
    "type-checks clean in a user's strict tsc, whatever their other strictness options",
    async ({ skip }) => {
      if (skipReason) return skip(skipReason);
      const tsc = path.join(root, "node_modules/typescript/bin/tsc");
      for (const config of ["tsconfig.json", "tsconfig.strictest.json"]) {
        const checked = await run(process.execPath, [tsc, "-p", config], {
          cwd: project,
          env: userEnv(),
        }).then(
          ({ stdout }) => ({ ok: true, output: stdout }),
          (error: { stdout?: string; stderr?: string }) => ({
            ok: false,
            output: `${error.stdout}${error.stderr}`,
          }),
        );
        expect(checked.output, config).toBe("");
        expect(checked.ok, config).toBe(true);
      }
      // The check is real: a wrong use of the API is reported.
      writeFileSync(
        path.join(project, "wrong.ts"),
        'import { MossCompiler } from "moss-ts";\nconst count: number = new MossCompiler();\nexport { count };\n',
      );
      const wrong = await run(process.execPath, [tsc, "-p", "tsconfig.json"], {
        cwd: project,
        env: userEnv(),
      }).catch((error: { stdout: string }) => error);
      expect(wrong.stdout).toContain("wrong.ts(2,7): error TS2322");
      rmSync(path.join(project, "wrong.ts"));
    },
    RUN_TIMEOUT_MS,
  );

  it(
    "runs a user's vitest suite that compiles a context module, with mossVitePlugin() alone (MossTestSuite, fakes)",
    async ({ skip }) => {
      if (skipReason) return skip(skipReason);
      // A second project: the user's own vitest (this checkout's version), and a config with only the plugin.
      const app = path.join(work, "vitest-app");
      cpSync(path.join(root, "test/packaging/vitest-consumer"), app, { recursive: true });
      const vitest = JSON.parse(readFileSync(path.join(root, "node_modules/vitest/package.json"), "utf8"));
      await npm(
        [
          "install",
          "--ignore-scripts",
          "--prefer-offline",
          "--no-audit",
          "--no-fund",
          path.join(work, pack!.filename),
          `vitest@${vitest.version}`,
        ],
        app,
        300_000,
      );
      provideNativeAddons(app);
      const result = await node(["node_modules/vitest/vitest.mjs", "run"], { cwd: app, timeoutMs: 240_000 });
      // vitest colours its report whatever the terminal: the colour codes are taken out.
      const output = `${result.stdout}\n${result.stderr}`.replace(/\x1b\[[0-9;]*m/g, "");
      expect(result.timedOut, output).toBe(false);
      expect(output).not.toContain("Unknown file extension");
      expect(output).not.toContain("without its locals export");
      expect(output).toMatch(/Tests\s+2 passed/);
      expect(result.code, output).toBe(0);
    },
    VITEST_TIMEOUT_MS,
  );
});

/*
 * The warm path (README "The warm path"), from the installed package: a daemon runs `prompt`, `check`, `run` and
 * `test` in a process that has moss-ts and TypeScript loaded, and must answer exactly what a process of the command's
 * own would. Each input a command reads is changed here and the next answer, served by the daemon, must change.
 * Each test has its own temp folder (TMPDIR), so its daemon and socket are its own; each stops its daemon.
 */
describe("the warm path (installed package)", () => {
  const MODULE = [
    'import { Moss as Parent } from "moss-ts";',
    'import { WORD } from "./word.ts";',
    "",
    "/** A module whose answers tell what it read. */",
    "export class Moss extends Parent {",
    "  turns = 0;",
    "}",
    "",
    "/** The word of word.ts. */",
    "export function word(): string {",
    "  return WORD;",
    "}",
    "",
    "/** The working directory and the greeting the module sees. */",
    "export function where(): string {",
    '  return process.cwd() + "|" + (process.env.WARM_GREETING ?? "none");',
    "}",
    "",
    "/** How often the host setup file's setup() ran in this process. */",
    "export function setups(): number {",
    "  return (globalThis as { warmSetups?: number }).warmSetups ?? 0;",
    "}",
    "",
  ].join("\n");
  const HOST_SETUP = [
    'import type { MossCompiler } from "moss-ts";',
    "",
    "export function setup(_compiler: MossCompiler): void {",
    "  const state = globalThis as { warmSetups?: number };",
    "  state.warmSetups = (state.warmSetups ?? 0) + 1;",
    "}",
    "",
  ].join("\n");
  const CODE = 'async function main(moss: Moss) { return [word(), where(), setups()].join(" ") }';
  let temp = "";
  let folder = "";

  /** This test's private temp folder (where its daemon's socket lives) and its environment. */
  const warmEnv = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
    TMPDIR: temp,
    MOSS_DAEMON_IDLE_SECONDS: "120",
    ...extra,
  });
  const privateFolder = () => path.join(temp, `moss-ts-${process.getuid?.()}`);
  const sockets = () =>
    existsSync(privateFolder())
      ? readdirSync(privateFolder())
          .filter((name) => /^daemon-[0-9a-f]+\.sock$/.test(name))
          .map((name) => path.join(privateFolder(), name))
      : [];
  const state = (socket: string): { ready: boolean; served: number; pid: number } | undefined => {
    try {
      return JSON.parse(readFileSync(`${socket}.state`, "utf8"));
    } catch {
      return undefined;
    }
  };
  async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 60_000): Promise<T> {
    const end = Date.now() + timeoutMs;
    while (Date.now() < end) {
      const found = probe();
      if (found !== undefined && found !== false) return found;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`timed out waiting for ${what}`);
  }
  /** The one daemon socket of this test once its warm process is ready. */
  const readyDaemon = async (): Promise<string> => {
    const socket = await until("a daemon socket", () => (sockets().length === 1 ? sockets()[0] : undefined));
    await until("a ready warm process", () => state(socket)?.ready === true || undefined);
    return socket;
  };
  const moss = (args: string[], options: { stdin?: string; cwd?: string; env?: NodeJS.ProcessEnv } = {}) =>
    node([path.join(project, "node_modules/moss-ts/bin/moss.js"), ...args], {
      timeoutMs: 90_000,
      ...options,
      env: warmEnv(options.env),
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    });

  beforeAll(() => {
    if (skipReason) return;
    temp = mkdtempSync(path.join(tmpdir(), "moss-ts-warm-"));
    folder = path.join(project, "warm");
    cpSync(path.join(project, "package.json"), path.join(folder, "package.json"));
    writeFileSync(path.join(folder, "context.ts"), MODULE);
    writeFileSync(path.join(folder, "context.host.ts"), HOST_SETUP);
    writeFileSync(path.join(folder, "word.ts"), 'export const WORD = "alpha";\n');
  });

  afterAll(async () => {
    if (!temp) return;
    await moss(["daemon", "stop"]);
    rmSync(temp, { recursive: true, force: true });
  });

  it(
    "answers as a process of its own would, after each input of the command changed",
    async ({ skip }) => {
      if (skipReason) return skip(skipReason);
      const run = (options: { cwd?: string; env?: NodeJS.ProcessEnv; module?: string } = {}) =>
        moss(["run", options.module ?? "warm/context.ts", "--code", "-"], { ...options, stdin: CODE });

      // The first command runs in its own process and starts the daemon for the next.
      const first = await run();
      expect(first.stderr).toBe("");
      expect(first.stdout).toContain(`alpha ${project}|none 1`);
      const socket = await readyDaemon();
      // Private: a socket only this user may open, in a folder only this user may enter.
      expect(statSync(socket).mode & 0o077).toBe(0);
      expect(statSync(privateFolder()).mode & 0o077).toBe(0);
      expect(statSync(socket).uid).toBe(process.getuid?.());

      const served = async (expected: number) => {
        await until(`command ${expected} served`, () =>
          state(socket)?.served === expected ? true : undefined,
        );
        await readyDaemon();
      };
      // The same command through the daemon: the same answer, the host setup run once in its process.
      const again = await run();
      expect(again.stderr).toBe("");
      expect(again.stdout).toBe(first.stdout);
      await served(1);

      // A file the module imports changed.
      writeFileSync(path.join(folder, "word.ts"), 'export const WORD = "beta";\n');
      const edited = await run();
      expect(edited.stdout).toContain(`beta ${project}|none 1`);
      await served(2);

      // The module itself changed: its prompt shows the new function, and code may call it.
      writeFileSync(
        path.join(folder, "context.ts"),
        `${MODULE}\n/** Added later. */\nexport function added(): number {\n  return 42;\n}\n`,
      );
      const prompt = await moss(["prompt", "warm/context.ts"]);
      expect(prompt.stdout).toContain("export function added(): number");
      await served(3);
      const checked = await moss(["check", "warm/context.ts", "--code", "-"], {
        stdin: "async function main(moss: Moss) { return added() + 1 }",
      });
      expect(checked.stdout).toContain("No errors.");
      expect(checked.code).toBe(0);
      await served(4);

      // The working directory, and the environment the module sees.
      const elsewhere = await run({ cwd: folder, module: "context.ts" });
      expect(elsewhere.stdout).toContain(`beta ${folder}|none 1`);
      await served(5);
      const greeted = await run({ env: { WARM_GREETING: "hi" } });
      expect(greeted.stdout).toContain(`beta ${project}|hi 1`);
      await served(6);

      // A failing command: its diagnostics, its exit code.
      const typo = await moss(["check", "warm/context.ts", "--code", "-"], {
        stdin: "async function main(moss: Moss) { return wrod() }",
      });
      expect(typo.stdout).toContain("Cannot find name 'wrod'");
      expect(typo.code).toBe(1);
      await served(7);

      // MOSS_NO_DAEMON=1: the command runs in its own process; the daemon serves nothing.
      const off = await run({ env: { MOSS_NO_DAEMON: "1" } });
      expect(off.stdout).toContain(`beta ${project}|none 1`);
      expect(state(socket)?.served).toBe(7);

      // A different Node start-up (a variable Node reads at start) is another daemon's, never this one's.
      const otherNode = await run({ env: { NODE_OPTIONS: "--max-old-space-size=3000" } });
      expect(otherNode.stdout).toContain(`beta ${project}|none 1`);
      expect(state(socket)?.served).toBe(7);
      await until("a second daemon", () => (sockets().length === 2 ? true : undefined));

      // moss-ts itself changed (an upgrade rewrites its files): the old daemon serves it no more.
      const installed = path.join(project, "node_modules", "moss-ts", "dist", "engine", "cli", "main.js");
      const later = new Date(Date.now() + 60_000);
      utimesSync(installed, later, later);
      const upgraded = await run();
      expect(upgraded.stdout).toContain(`beta ${project}|none 1`);
      expect(state(socket)?.served).toBe(7);
    },
    RUN_TIMEOUT_MS,
  );

  it(
    "ends when idle, and `moss daemon stop` ends it at once",
    async ({ skip }) => {
      if (skipReason) return skip(skipReason);
      const idle = { MOSS_DAEMON_IDLE_SECONDS: "5" };
      const cleanFolder = () => rmSync(privateFolder(), { recursive: true, force: true });
      await moss(["daemon", "stop"]);
      cleanFolder();
      // Watched while the command runs: the daemon it starts may end (idle) before the command does.
      const appeared = until("a daemon socket", () => {
        const [socket] = sockets();
        if (socket === undefined) return undefined;
        try {
          return { socket, pid: Number(readFileSync(`${socket}.pid`, "utf8")) };
        } catch {
          return undefined;
        }
      });
      await moss(["prompt", "warm/context.ts"], { env: idle });
      const { socket, pid } = await appeared;
      await until("the idle daemon to end", () => (existsSync(socket) ? undefined : true), 30_000);
      await until("its process to end", () => {
        try {
          process.kill(pid, 0);
          return undefined;
        } catch {
          return true;
        }
      });

      await moss(["prompt", "warm/context.ts"]);
      const running = await readyDaemon();
      const status = await moss(["daemon", "status"]);
      expect(status.stdout).toContain(running);
      expect(status.stdout).toContain("ready");
      const runningPid = Number(readFileSync(`${running}.pid`, "utf8"));
      const stopped = await moss(["daemon", "stop"]);
      expect(stopped.stdout).toContain("Stopped 1 daemon.");
      // Gone by the time the command answered: its socket, and its process (with its warm process before it).
      expect(existsSync(running)).toBe(false);
      expect(isRunning(runningPid)).toBe(false);
    },
    RUN_TIMEOUT_MS,
  );
});
