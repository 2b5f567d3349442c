// Code moss-ts bundles once and runs later (worker entries, the isolate script) is cached only in a temp folder
// this user alone can write: in the shared temp folder, a file another user planted under the expected name would
// run as moss-ts's own code.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { privateTempFolder } from "../../engine/private-temp-folder.ts";

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
});
