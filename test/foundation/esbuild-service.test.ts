// esbuild's services stop once nothing compiled for MOSS_ESBUILD_IDLE_MS (what `moss serve` sets), start again on the
// next compile, are never stopped while a hold is open, and are never stopped where the variable is unset (an
// application that embeds moss-ts may use the same esbuild).
import { readdirSync, readFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { esbuildIdleMs, holdEsbuild, withEsbuild } from "../../engine/esbuild-service.ts";

/** The esbuild processes whose parent is this process. */
function esbuildChildren(): number[] {
  const children: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const [, comm, rest] = /^\d+ \((.*)\) (.*)$/s.exec(stat) ?? [];
      if (comm === "esbuild" && Number(rest!.split(" ")[1]) === process.pid) children.push(Number(name));
    } catch {
      // A process that ended while it was read.
    }
  }
  return children;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean, ms = 10_000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(25)) if (condition()) return true;
  return condition();
}

const compile = (code: string) =>
  withEsbuild((esbuild) => esbuild.transform(code, { loader: "ts" })).then((result) => result.code);

describe.skipIf(process.platform !== "linux")("esbuild's services (esbuild-service.ts)", () => {
  const saved = { idle: process.env.MOSS_ESBUILD_IDLE_MS, workers: process.env.ESBUILD_WORKER_THREADS };
  // Only asynchronous calls run here, so the worker thread esbuild loaded with (or without) does not matter.
  beforeEach(() => {
    process.env.ESBUILD_WORKER_THREADS = "0";
  });
  afterEach(() => {
    for (const [name, value] of [
      ["MOSS_ESBUILD_IDLE_MS", saved.idle],
      ["ESBUILD_WORKER_THREADS", saved.workers],
    ] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  it("reads MOSS_ESBUILD_IDLE_MS: milliseconds of 0 or more, with ESBUILD_WORKER_THREADS=0; else never stopped", () => {
    const off = { ESBUILD_WORKER_THREADS: "0" };
    expect(esbuildIdleMs({ ...off })).toBeUndefined();
    expect(esbuildIdleMs({ ...off, MOSS_ESBUILD_IDLE_MS: "" })).toBeUndefined();
    expect(esbuildIdleMs({ ...off, MOSS_ESBUILD_IDLE_MS: "soon" })).toBeUndefined();
    expect(esbuildIdleMs({ ...off, MOSS_ESBUILD_IDLE_MS: "-1" })).toBeUndefined();
    expect(esbuildIdleMs({ ...off, MOSS_ESBUILD_IDLE_MS: "0" })).toBe(0);
    expect(esbuildIdleMs({ ...off, MOSS_ESBUILD_IDLE_MS: " 5000 " })).toBe(5000);
    // esbuild's synchronous calls run in a worker thread whose stop leaves its compiler process unreaped.
    expect(esbuildIdleMs({ MOSS_ESBUILD_IDLE_MS: "5000" })).toBeUndefined();
    expect(esbuildIdleMs({ MOSS_ESBUILD_IDLE_MS: "5000", ESBUILD_WORKER_THREADS: "1" })).toBeUndefined();
  });

  it("stops the service once idle and starts it again for the next compile", async () => {
    process.env.MOSS_ESBUILD_IDLE_MS = "100";
    expect(await compile("let a: number = 1")).toBe("let a = 1;\n");
    const first = esbuildChildren();
    expect(first.length).toBeGreaterThan(0);
    expect(await until(() => esbuildChildren().length === 0)).toBe(true);
    expect(await compile("let b: string = 'x'")).toBe('let b = "x";\n');
    const again = esbuildChildren();
    expect(again.length).toBeGreaterThan(0);
    expect(again.some((pid) => first.includes(pid))).toBe(false);
    expect(await until(() => esbuildChildren().length === 0)).toBe(true);
  });

  it("keeps the service while a hold is open, however long, and stops it after the hold ends", async () => {
    process.env.MOSS_ESBUILD_IDLE_MS = "50";
    const release = holdEsbuild();
    await compile("let a = 1");
    await sleep(400);
    expect(esbuildChildren().length).toBeGreaterThan(0);
    expect(await compile("let c = 3")).toBe("let c = 3;\n");
    release();
    release(); // a second release changes nothing
    expect(await until(() => esbuildChildren().length === 0)).toBe(true);
  });

  it("compiles that overlap all finish: the service stops only when the last one is done", async () => {
    process.env.MOSS_ESBUILD_IDLE_MS = "0";
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, index) => compile(`let v${index}: number = ${index}`)),
    );
    expect(results).toEqual(Array.from({ length: 20 }, (_, index) => `let v${index} = ${index};\n`));
    expect(await until(() => esbuildChildren().length === 0)).toBe(true);
  });

  it("never stops the service where MOSS_ESBUILD_IDLE_MS is unset", async () => {
    delete process.env.MOSS_ESBUILD_IDLE_MS;
    await compile("let a = 1");
    const running = esbuildChildren();
    expect(running.length).toBeGreaterThan(0);
    await sleep(500);
    expect(esbuildChildren()).toEqual(running);
    // Leave no service behind for the next file of this fork.
    await withEsbuild((esbuild) => esbuild.stop());
  });
});
