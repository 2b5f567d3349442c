import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { runMoss } from "../helpers/moss-cli.ts";

const SPHERO = "examples/sphero";
const TWIRL = "async function main(moss: Moss) {\n  return moss.body.twirl();\n}\n";

describe("moss check keeps its results between runs", () => {
  let temp: string;
  let folder: string;
  let module: string;
  let cacheFolder: string;
  /** A fresh private temp folder: the test starts with no kept result and leaves none behind. */
  const check = (code: string, ...extra: string[]) =>
    runMoss(["check", module, "--code", "-", ...extra], { input: code, env: { TMPDIR: temp } });

  beforeAll(async () => {
    temp = await mkdtemp(path.join(tmpdir(), "moss-check-cache-"));
    cacheFolder = path.join(temp, `moss-ts-${process.getuid?.()}`, "result-cache");
    // Inside the repository, where the module's `import … from "moss-ts"` finds moss-ts itself.
    folder = path.resolve("test/fixtures/.tmp", `check-cache-${process.pid}-${Date.now()}`);
    await mkdir(folder, { recursive: true });
    for (const file of ["context.ts", "bolt.ts", "simulated-bolt.ts"]) {
      await copyFile(path.join(SPHERO, file), path.join(folder, file));
    }
    module = path.relative(process.cwd(), path.join(folder, "context.ts"));
  });
  afterAll(async () => {
    await rm(temp, { recursive: true, force: true });
    await rm(folder, { recursive: true, force: true });
  });

  test("a repeated check answers from the kept result, byte for byte what a check without the cache prints; an edited imported file, module or code is checked again", async () => {
    const first = await check(TWIRL);
    expect(first.code).toBe(1);
    expect(first.stdout).toContain("twirl");
    const entries = await readdir(cacheFolder);
    expect(entries).toHaveLength(1);

    const uncached = await check(TWIRL, "--no-cache");
    const repeated = await check(TWIRL);
    expect(uncached).toEqual(first);
    expect(repeated).toEqual(first);

    // The kept result is what a repeated check prints: a changed entry shows through (nothing else reads it).
    const entryFile = path.join(cacheFolder, entries[0]!);
    const entry = JSON.parse(await readFile(entryFile, "utf8")) as {
      result: Array<{ message: string }>;
    };
    entry.result[0]!.message = "the kept result";
    await writeFile(entryFile, JSON.stringify(entry));
    expect((await check(TWIRL)).stdout).toContain("the kept result");
    expect((await check(TWIRL, "--no-cache")).stdout).not.toContain("the kept result");

    // An imported file gains the method: checked again, no error.
    const bolt = path.join(folder, "bolt.ts");
    const source = await readFile(bolt, "utf8");
    await writeFile(
      bolt,
      source.replace(
        "  /** Stops at once. */",
        "  /** Spins once. */\n  twirl(): number {\n    return 1;\n  }\n\n  /** Stops at once. */",
      ),
    );
    const afterImportEdit = await check(TWIRL);
    expect(afterImportEdit).toEqual({ code: 0, stdout: "No errors.\n", stderr: "" });

    // Other code is another entry; a changed module is checked again.
    const other = await check("async function main(moss: Moss) {\n  return moss.body.twirl(1);\n}\n");
    expect(other.code).toBe(1);
    expect(other.stdout).toContain("TS2554");
    const context = path.join(folder, "context.ts");
    await writeFile(
      context,
      (await readFile(context, "utf8")).replace(
        "export class Moss extends Parent {",
        "export class Moss extends Parent {\n  twirls = 0;",
      ),
    );
    const afterModuleEdit = await check(
      "async function main(moss: Moss) {\n  return moss.twirls + moss.body.twirl();\n}\n",
    );
    expect(afterModuleEdit).toEqual({ code: 0, stdout: "No errors.\n", stderr: "" });
    await writeFile(context, (await readFile(context, "utf8")).replace("\n  twirls = 0;", ""));
    const afterRevert = await check(
      "async function main(moss: Moss) {\n  return moss.twirls + moss.body.twirl();\n}\n",
    );
    expect(afterRevert.code).toBe(1);
    expect(afterRevert.stdout).toContain("twirls");
  }, 300_000);

  test("a module with a host setup file keeps its result too (issue 27; it was checked every time before)", async () => {
    const setup = path.join(folder, "context.host.ts");
    await writeFile(setup, "export function setup(): void {}\n");
    try {
      const before = (await readdir(cacheFolder).catch(() => [])).length;
      const code = "async function main(moss: Moss) {\n  return moss.body.heading();\n}\n";
      const result = await check(code);
      expect(result).toEqual({ code: 0, stdout: "No errors.\n", stderr: "" });
      expect((await readdir(cacheFolder).catch(() => [])).length).toBe(before + 1);
      expect(await check(code)).toEqual(result);
    } finally {
      await rm(setup, { force: true });
    }
  }, 120_000);
});
