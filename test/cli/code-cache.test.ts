import { mkdir, mkdtemp, readdir, rm, stat, utimes, writeFile } from "node:fs/promises";
import nodeModule from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect, test } from "vitest";
import { runMoss } from "../helpers/moss-cli.ts";

const SPHERO = "examples/sphero/context.ts";
const CODE =
  "async function main(moss: Moss) {\n  await moss.body.spn(90, 1);\n  const count: string = 1;\n}\n";
/** Node ≥ 22.1 keeps its own compile cache (its own file layout); older lines use moss-ts's V8 code cache. */
const NODE_COMPILE_CACHE =
  typeof (nodeModule as { enableCompileCache?: unknown }).enableCompileCache === "function";

test("moss check keeps TypeScript's compiled code in the user's private temp folder, with the same diagnostics as without it", async () => {
  const temp = await mkdtemp(path.join(tmpdir(), "moss-code-cache-"));
  try {
    const env = { TMPDIR: temp };
    // A file of the private temp folder unused for 8 days: a command that uses the folder trims it.
    const privateFolder = path.join(temp, `moss-ts-${process.getuid?.()}`);
    await mkdir(privateFolder, { mode: 0o700 });
    const stale = path.join(privateFolder, "check-worker-0000000000000000.mjs");
    await writeFile(stale, "export {};\n", { mode: 0o600 });
    const eightDaysAgo = new Date(Date.now() - 8 * 24 * 60 * 60 * 1000);
    await utimes(stale, eightDaysAgo, eightDaysAgo);
    const uncached = await runMoss(["check", SPHERO, "--code", "-", "--no-cache"], {
      input: CODE,
      env: { ...env, NODE_DISABLE_COMPILE_CACHE: "1" },
    });
    const folder = path.join(privateFolder, "code-cache");
    await expect(readdir(folder)).rejects.toThrow(/ENOENT/);
    const first = await runMoss(["check", SPHERO, "--code", "-", "--no-cache"], { input: CODE, env });
    const files = await readdir(folder);
    expect(files.length).toBeGreaterThan(0);
    await expect(stat(stale)).rejects.toThrow(/ENOENT/);
    const written = NODE_COMPILE_CACHE
      ? undefined
      : path.join(folder, files.find((file) => /^typescript-.*\.bin$/.test(file))!);
    const before = written === undefined ? undefined : await stat(written);
    const second = await runMoss(["check", SPHERO, "--code", "-", "--no-cache"], { input: CODE, env });

    expect(uncached.code).toBe(1);
    expect(uncached.stdout).toContain("spn");
    expect(uncached.stdout).toContain("TS2322");
    expect(first).toEqual(uncached);
    expect(second).toEqual(uncached);
    if (written !== undefined) {
      // V8 accepted the cache the first run wrote: the second run did not write it again (a write renames a new
      // file into place, a new inode), only marked it used (its modification time is its last use, for trimming).
      const after = await stat(written);
      expect(after.ino).toBe(before!.ino);
      expect(after.mtimeMs).toBeGreaterThan(before!.mtimeMs);
      expect((after.mode & 0o077) === 0).toBe(true);
    }
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
}, 120_000);
