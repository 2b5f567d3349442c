import {
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, test } from "vitest";
import { confinedPath } from "../../../moss-modules/files/confined-path.ts";
import { inParent } from "../../../moss-modules/files/files.ts";

const BASE = fileURLToPath(new URL(`../../fixtures/.tmp/in-parent-${process.pid}/`, import.meta.url));
let root: string;
let outside: string;

beforeAll(() => {
  mkdirSync(path.join(BASE, "work", "swap"), { recursive: true });
  mkdirSync(path.join(BASE, "outside"), { recursive: true });
  root = realpathSync(path.join(BASE, "work"));
  outside = realpathSync(path.join(BASE, "outside"));
});
afterAll(() => rmSync(BASE, { recursive: true, force: true }));

test.runIf(process.platform === "linux")(
  "a parent folder swapped for a link after its check does not redirect what is done in it",
  async () => {
    const parked = path.join(BASE, "parked");
    await inParent(root, confinedPath("swap/new.txt"), async (full) => {
      // The swap happens exactly between the check and the act.
      renameSync(path.join(root, "swap"), parked);
      symlinkSync(outside, path.join(root, "swap"));
      writeFileSync(full, "created");
    });
    expect(existsSync(path.join(outside, "new.txt"))).toBe(false);
    expect(readFileSync(path.join(parked, "new.txt"), "utf8")).toBe("created");
  },
);

test("a parent that already leads outside is refused before anything is done", async () => {
  symlinkSync(outside, path.join(root, "out"));
  let acted = false;
  await expect(
    inParent(root, confinedPath("out/new.txt"), async () => {
      acted = true;
    }),
  ).rejects.toMatchObject({ name: "FilesError", code: "refused", relativePath: "out" });
  expect(acted).toBe(false);
});
