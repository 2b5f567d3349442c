// esbuild's services stop once nothing compiled for MOSS_ESBUILD_IDLE_MS (what `moss serve` sets, with
// ESBUILD_WORKER_THREADS=0), start again on the next compile, are never stopped while a hold is open, and are never
// stopped where either variable is missing (an application that embeds moss-ts may use the same esbuild; a stopped
// synchronous worker would leave its compiler process unreaped). Each case runs in a process of its own: esbuild
// reads ESBUILD_WORKER_THREADS once, when it loads, and this test process loaded it long before.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const SERVICE = fileURLToPath(new URL("../../engine/esbuild-service.ts", import.meta.url));
const DESCENDANTS = fileURLToPath(new URL("../helpers/descendants.ts", import.meta.url));
const folder = mkdtempSync(path.join(tmpdir(), "moss-esbuild-service-"));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** The helpers every case's script starts with: its esbuild processes, waiting, a compile through the service. */
const PRELUDE = `
import { descendantsNamed } from ${JSON.stringify(DESCENDANTS)};
import { esbuildIdleMs, holdEsbuild, withEsbuild } from ${JSON.stringify(SERVICE)};
// The services tsx runs to load this script (on Node 20 in its hooks' thread) are not the ones under test.
const everyChild = () => descendantsNamed("esbuild", process.pid);
const baseline = new Set(everyChild().map((child) => child.pid));
const children = () => everyChild().filter((child) => !baseline.has(child.pid));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const until = async (condition, ms = 10000) => {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) if (condition()) return true;
  return condition();
};
const compile = (code) => withEsbuild((esbuild) => esbuild.transform(code, { loader: "ts" })).then((result) => result.code);
const report = {};
`;

async function runCase(name: string, body: string, env: Record<string, string | undefined>) {
  const file = path.join(folder, `${name}.mts`);
  writeFileSync(file, `${PRELUDE}\n${body}\nconsole.log(JSON.stringify(report));\nprocess.exit(0);\n`);
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  delete childEnv.MOSS_ESBUILD_IDLE_MS;
  delete childEnv.ESBUILD_WORKER_THREADS;
  for (const [key, value] of Object.entries(env)) if (value !== undefined) childEnv[key] = value;
  const child = spawn(process.execPath, ["--import", "tsx", file], {
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  expect(code, stderr).toBe(0);
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
}

const SERVER = { ESBUILD_WORKER_THREADS: "0" };

describe.skipIf(process.platform !== "linux")("esbuild's services (esbuild-service.ts)", () => {
  it("reads MOSS_ESBUILD_IDLE_MS: milliseconds of 0 or more, with ESBUILD_WORKER_THREADS=0; else never stopped", async () => {
    const report = await runCase(
      "settings",
      `const off = { ESBUILD_WORKER_THREADS: "0" };
report.values = [
  esbuildIdleMs({ ...off }), esbuildIdleMs({ ...off, MOSS_ESBUILD_IDLE_MS: "" }),
  esbuildIdleMs({ ...off, MOSS_ESBUILD_IDLE_MS: "soon" }), esbuildIdleMs({ ...off, MOSS_ESBUILD_IDLE_MS: "-1" }),
  esbuildIdleMs({ ...off, MOSS_ESBUILD_IDLE_MS: "0" }), esbuildIdleMs({ ...off, MOSS_ESBUILD_IDLE_MS: " 5000 " }),
  esbuildIdleMs({ MOSS_ESBUILD_IDLE_MS: "5000" }), esbuildIdleMs({ MOSS_ESBUILD_IDLE_MS: "5000", ESBUILD_WORKER_THREADS: "1" }),
].map((value) => value ?? null);`,
      SERVER,
    );
    expect(report.values).toEqual([null, null, null, null, 0, 5000, null, null]);
    // Loaded where esbuild's synchronous calls use a worker thread: never stopped, whatever the variables say later.
    const loadedWithWorkers = await runCase(
      "workers",
      `report.value = esbuildIdleMs({ ESBUILD_WORKER_THREADS: "0", MOSS_ESBUILD_IDLE_MS: "100" }) ?? null;`,
      {},
    );
    expect(loadedWithWorkers.value).toBeNull();
  });

  it("stops the service once idle and starts it again for the next compile; no process is left unreaped", async () => {
    const report = await runCase(
      "idle",
      `report.first = await compile("let a: number = 1");
const first = children();
report.running = first.length;
report.stopped = await until(() => children().length === 0);
report.second = await compile("let b: string = 'x'");
const again = children();
report.restarted = again.length > 0 && !again.some((child) => first.some((old) => old.pid === child.pid));
report.stoppedAgain = await until(() => children().length === 0);
// A synchronous call (a compiler process of its own, no worker thread) leaves nothing behind either.
report.sync = withEsbuild((esbuild) => esbuild.transformSync("let c: number = 3", { loader: "ts" })).code;
await sleep(300);
report.after = children();`,
      { ...SERVER, MOSS_ESBUILD_IDLE_MS: "100" },
    );
    expect(report).toEqual({
      first: "let a = 1;\n",
      running: expect.any(Number),
      stopped: true,
      second: 'let b = "x";\n',
      restarted: true,
      stoppedAgain: true,
      sync: "let c = 3;\n",
      after: [],
    });
    expect(report.running).toBeGreaterThan(0);
  });

  it("keeps the service while a hold is open, however long, and stops it after the hold ends", async () => {
    const report = await runCase(
      "hold",
      `const release = holdEsbuild();
await compile("let a = 1");
await sleep(400);
report.held = children().length;
report.compiled = await compile("let c = 3");
release();
release();
report.stopped = await until(() => children().length === 0);`,
      { ...SERVER, MOSS_ESBUILD_IDLE_MS: "50" },
    );
    expect(report.held).toBeGreaterThan(0);
    expect(report).toMatchObject({ compiled: "let c = 3;\n", stopped: true });
  });

  it("compiles that overlap all finish: the service stops only when the last one is done", async () => {
    const report = await runCase(
      "overlap",
      `report.results = await Promise.all(Array.from({ length: 20 }, (_, index) => compile("let v" + index + ": number = " + index)));
report.stopped = await until(() => children().length === 0);`,
      { ...SERVER, MOSS_ESBUILD_IDLE_MS: "0" },
    );
    expect(report.results).toEqual(Array.from({ length: 20 }, (_, index) => `let v${index} = ${index};\n`));
    expect(report.stopped).toBe(true);
  });

  it("never stops the service where MOSS_ESBUILD_IDLE_MS is unset, nor where ESBUILD_WORKER_THREADS is not 0", async () => {
    for (const env of [SERVER, { MOSS_ESBUILD_IDLE_MS: "50" }]) {
      const report = await runCase(
        "unset",
        `await compile("let a = 1");
const running = children().map((child) => child.pid);
await sleep(500);
report.same = running.length > 0 && JSON.stringify(children().map((child) => child.pid)) === JSON.stringify(running);`,
        env,
      );
      expect(report.same).toBe(true);
    }
  });
});
