import fs, { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";
import { trackReads } from "../../engine/cli/read-tracker.ts";

test("trackReads records what the work reads, probes and lists through node:fs, and leaves node:fs as it was", async () => {
  const folder = await mkdtemp(path.join(tmpdir(), "moss-read-tracker-"));
  try {
    await writeFile(path.join(folder, "a.txt"), "a");
    await writeFile(path.join(folder, "b.txt"), "b");
    const before = { readFileSync: fs.readFileSync, readdir: fs.promises.readdir };
    const { value, tracked } = await trackReads(async () => {
      const a = readFileSync(path.join(folder, "a.txt"), "utf8");
      const b = await readFile(path.join(folder, "b.txt"), "utf8");
      fs.readdirSync(folder);
      const missing = await promisify(fs.exists)(path.join(folder, "missing.txt"));
      // What hangs on a wrapped function stays usable.
      fs.realpathSync.native(folder);
      return `${a}${b}${missing}`;
    });
    expect(value).toBe("abfalse");
    expect(Object.fromEntries(tracked.reads)).toMatchObject({
      [path.join(folder, "a.txt")]: "content",
      [path.join(folder, "b.txt")]: "content",
      [folder]: "listing",
      [path.join(folder, "missing.txt")]: "content",
    });
    expect(tracked.printed).toBe(false);
    expect(fs.readFileSync).toBe(before.readFileSync);
    expect(fs.promises.readdir).toBe(before.readdir);
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
});

test("trackReads records Node's warnings to replay and whether the work printed, also when it throws", async () => {
  const { tracked } = await trackReads(async () => {
    process.emitWarning("a binding conflict", { code: "MOSS_TEST_WARNING" });
  });
  expect(tracked.warnings).toContainEqual({
    message: "a binding conflict",
    name: "Warning",
    code: "MOSS_TEST_WARNING",
  });
  const original = console.log;
  await expect(
    trackReads(async () => {
      throw new Error("setup failed");
    }),
  ).rejects.toThrow("setup failed");
  expect(console.log).toBe(original);
});
