// Code moss-ts bundles once and runs later (worker entries, the isolate script) is cached only in a temp folder
// this user alone can write: in the shared temp folder, a file another user planted under the expected name would
// run as moss-ts's own code.
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  truncateSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  PRIVATE_FILE_MAX_AGE_MS,
  PRIVATE_FILE_MIN_AGE_MS,
  PRIVATE_FOLDER_MAX_BYTES,
  privateTempFolder,
  trimPrivateTempFolder,
  writePrivateFile,
} from "../../engine/private-temp-folder.ts";
import { runnableEntry } from "../../engine/runnable-entry.ts";

describe.runIf(process.getuid !== undefined)("privateTempFolder", () => {
  const saved = process.env.TMPDIR;
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), "moss-private-"));
    process.env.TMPDIR = root;
  });
  afterEach(() => {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
    rmSync(root, { recursive: true, force: true });
  });

  it("makes a folder only this user can read or write", () => {
    const folder = privateTempFolder();
    expect(path.dirname(folder)).toBe(root);
    const stat = statSync(folder);
    expect(stat.uid).toBe(process.getuid!());
    expect(stat.mode & 0o777).toBe(0o700);
    expect(privateTempFolder()).toBe(folder);
  });

  it("passes over a folder of that name that others can enter (planted or loosened) for a private one of its own", () => {
    const planted = path.join(root, `moss-ts-${process.getuid!()}`);
    mkdirSync(planted);
    for (const mode of [0o777, 0o750]) {
      chmodSync(planted, mode);
      const folder = privateTempFolder();
      expect(folder).not.toBe(planted);
      expect(statSync(folder).mode & 0o777).toBe(0o700);
      expect(statSync(folder).uid).toBe(process.getuid!());
    }
  });

  describe("is bounded: files unused for days, then the least recently used past the size bound, go", () => {
    const HOUR_MS = 60 * 60 * 1000;
    /** A file of `bytes` (sparse: no disk is used) last used `ageMs` ago. */
    const place = (relative: string, ageMs: number, bytes = 10): string => {
      const file = path.join(privateTempFolder(), relative);
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, "x");
      if (bytes > 1) truncateSync(file, bytes);
      const used = new Date(Date.now() - ageMs);
      utimesSync(file, used, used);
      return file;
    };

    it("removes files (any depth) unused for longer than the age bound, keeps the rest, and folders left empty", () => {
      const stale = place("check-worker-old.mjs", PRIVATE_FILE_MAX_AGE_MS + HOUR_MS);
      const staleDeep = place("code-cache/v22-x64/old.cache", PRIVATE_FILE_MAX_AGE_MS + HOUR_MS);
      const staleResult = place("check-cache/old.json", PRIVATE_FILE_MAX_AGE_MS + HOUR_MS);
      const recent = place("check-worker-new.mjs", PRIVATE_FILE_MAX_AGE_MS - HOUR_MS);
      const fresh = place("check-cache/new.json", 0);
      const emptied = path.join(privateTempFolder(), "code-cache", "v22-x64");
      const old = new Date(Date.now() - PRIVATE_FILE_MIN_AGE_MS - HOUR_MS);
      utimesSync(emptied, old, old);
      trimPrivateTempFolder({ force: true });
      for (const file of [stale, staleDeep, staleResult]) expect(existsSync(file), file).toBe(false);
      for (const file of [recent, fresh]) expect(existsSync(file), file).toBe(true);
      expect(existsSync(emptied)).toBe(false);
      expect(existsSync(path.dirname(fresh))).toBe(true);
    });

    it("past the size bound removes the least recently used first, never a file used within the last day", () => {
      const third = Math.ceil(PRIVATE_FOLDER_MAX_BYTES / 3);
      const oldest = place("code-cache/typescript-a.bin", PRIVATE_FILE_MIN_AGE_MS + 5 * HOUR_MS, 2 * third);
      const older = place("code-cache/typescript-b.bin", PRIVATE_FILE_MIN_AGE_MS + 3 * HOUR_MS, third);
      const recent = place("code-cache/typescript-c.bin", PRIVATE_FILE_MIN_AGE_MS - HOUR_MS, 2 * third);
      const justUsed = place("code-cache/typescript-d.bin", 0, 2 * third);
      trimPrivateTempFolder({ force: true });
      // 7 thirds of the bound: the two older files go, oldest first; the rest is still over but was used lately.
      expect(existsSync(oldest)).toBe(false);
      expect(existsSync(older)).toBe(false);
      expect(existsSync(recent)).toBe(true);
      expect(existsSync(justUsed)).toBe(true);
    });

    it("a write trims, once per process, and not when another process trimmed within the hour", () => {
      const stale = place("isolate-script-old.js", PRIVATE_FILE_MAX_AGE_MS + HOUR_MS);
      writePrivateFile(path.join(privateTempFolder(), "check-cache", "a.json"), "{}");
      expect(existsSync(stale)).toBe(false);
      const later = place("isolate-script-older.js", PRIVATE_FILE_MAX_AGE_MS + HOUR_MS);
      writePrivateFile(path.join(privateTempFolder(), "check-cache", "b.json"), "{}");
      expect(existsSync(later), "trimmed once per process").toBe(true);
      expect(readdirSync(path.join(privateTempFolder(), "check-cache")).sort()).toEqual(["a.json", "b.json"]);
    });

    it("a write does not trim when another process trimmed within the hour (its stamp in the folder)", () => {
      writeFileSync(path.join(privateTempFolder(), ".trimmed"), "");
      const stale = place("sandbox-process-old.mjs", PRIVATE_FILE_MAX_AGE_MS + HOUR_MS);
      writePrivateFile(path.join(privateTempFolder(), "check-cache", "a.json"), "{}");
      expect(existsSync(stale)).toBe(true);
    });

    it("an entry this process bundled and another process trimmed is bundled again, not started missing", () => {
      const source = path.join(root, "tiny-entry.ts");
      writeFileSync(source, "const answer: number = 42;\nconsole.log(answer);\n");
      const first = runnableEntry(source);
      expect(existsSync(first)).toBe(true);
      rmSync(first);
      const second = runnableEntry(source);
      expect(second).toBe(first);
      expect(existsSync(second)).toBe(true);
      // Marked used again: a trim keeps it however old the folder's other files are.
      const aged = new Date(Date.now() - PRIVATE_FILE_MAX_AGE_MS - 60 * 60 * 1000);
      utimesSync(second, aged, aged);
      expect(runnableEntry(source)).toBe(second);
      trimPrivateTempFolder({ force: true });
      expect(existsSync(second)).toBe(true);
    });
  });
});
