import { execFileSync } from "node:child_process";
import {
  linkSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { FilesRig } from "../moss-modules/files/files-rig.ts";

const SECRET = "outside-secret";

/** Model code: runs each attempt, returns its outcome (`ok:<value>` or the error's code) per attempt. */
function attempts(calls: string[]): string {
  return `async function main(moss: Moss) {
  const outcomes: string[] = [];
  const attempts: Array<() => Promise<unknown>> = [${calls.map((call) => `() => ${call}`).join(",\n    ")}];
  for (const attempt of attempts) {
    try { outcomes.push("ok:" + JSON.stringify(await attempt())); }
    catch (error) { const e = error as Error & { code?: string }; outcomes.push(e.name + ":" + e.code + ":" + e.message); }
  }
  return outcomes;
}`;
}

describe.each(["in-process", "process"] as const)("Files attacks from model code (%s sandbox)", (driver) => {
  const rig = new FilesRig(`attacks-${driver}`);
  beforeAll(() => rig.open(driver, { maxReadBytes: 1024, maxWriteBytes: 1024, maxListEntries: 100 }), 60_000);
  afterAll(() => rig.close());

  async function outcomes(calls: string[]): Promise<string[]> {
    const execution = await rig.run(attempts(calls));
    expect(execution.error).toBeUndefined();
    const seen = execution.returns as string[];
    expect(seen).toHaveLength(calls.length);
    const text = JSON.stringify(seen);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(rig.base);
    return seen;
  }

  test("every spelling of a way out is refused or names a literal file inside", async () => {
    const spellings = [
      "../outside/secret.txt",
      "a/../../outside/secret.txt",
      "./../outside/secret.txt",
      "/etc/passwd",
      `${rig.outside}/secret.txt`,
      "..\\outside\\secret.txt",
      "..%2foutside%2fsecret.txt",
      "%2e%2e/outside/secret.txt",
      "\u2024\u2024/outside/secret.txt",
      "\uff0e\uff0e/outside/secret.txt",
      "..\u0000/outside/secret.txt",
      "secret.txt\u0000.md",
      "~/secret.txt",
      ".runtime/config.yaml",
      "notes/.git/config",
      "..",
      ".",
      "",
      "x".repeat(5000),
    ];
    const seen = await outcomes(spellings.map((spelling) => `moss.files.read(${JSON.stringify(spelling)})`));
    for (const [index, outcome] of seen.entries()) {
      // Percent signs are not decoded: "%2e%2e" is a literal name, and no such folder exists inside the root.
      const literal = spellings[index]!.startsWith("%");
      expect(outcome, spellings[index]).toMatch(literal ? /^FilesError:not-found:/ : /^FilesError:refused:/);
    }
    // Writes with the same spellings create nothing outside.
    const writes = await outcomes(
      spellings.slice(0, 6).map((spelling) => `moss.files.write(${JSON.stringify(spelling)}, "pwned")`),
    );
    for (const outcome of writes) expect(outcome).toMatch(/^FilesError:refused:/);
    expect(readFileSync(path.join(rig.outside, "secret.txt"), "utf8")).toBe(SECRET);
  });

  test("links leading outside, or into a reserved folder, are refused for every operation", async () => {
    symlinkSync(rig.outside, path.join(rig.root, "out-dir"));
    symlinkSync(path.join(rig.outside, "secret.txt"), path.join(rig.root, "out-file.txt"));
    symlinkSync("../outside/secret.txt", path.join(rig.root, "out-relative.txt"));
    mkdirSync(path.join(rig.root, ".runtime"));
    writeFileSync(path.join(rig.root, ".runtime", "token.txt"), SECRET);
    symlinkSync(".runtime", path.join(rig.root, "reserved"));
    mkdirSync(path.join(rig.root, "docs"));
    writeFileSync(path.join(rig.root, "docs", "inside.txt"), "inside");
    symlinkSync("docs", path.join(rig.root, "alias"));
    const seen = await outcomes([
      `moss.files.read("out-dir/secret.txt")`,
      `moss.files.read("out-file.txt")`,
      `moss.files.read("out-relative.txt")`,
      `moss.files.write("out-file.txt", "pwned")`,
      `moss.files.append("out-file.txt", "pwned")`,
      `moss.files.write("out-dir/new.txt", "pwned")`,
      `moss.files.mkdir("out-dir/sub")`,
      `moss.files.list("out-dir")`,
      `moss.files.stat("out-dir/secret.txt")`,
      `moss.files.move("out-dir/secret.txt", "stolen.txt")`,
      `moss.files.move("docs/inside.txt", "out-dir/planted.txt")`,
      `moss.files.read("reserved/token.txt")`,
      `moss.files.list("reserved")`,
      `moss.files.read("alias/inside.txt")`,
      `moss.files.list().then((listing) => listing.entries.map((entry) => entry.name))`,
    ]);
    expect(seen.slice(0, 13).every((outcome) => outcome.startsWith("FilesError:refused:"))).toBe(true);
    expect(seen[13]).toBe('ok:"inside"');
    // Reserved names are not listed; links are listed as links, not followed.
    expect(JSON.parse(seen[14]!.slice(3))).toEqual([
      "alias",
      "docs",
      "out-dir",
      "out-file.txt",
      "out-relative.txt",
      "reserved",
    ]);
    expect(readFileSync(path.join(rig.outside, "secret.txt"), "utf8")).toBe(SECRET);
    expect(execFileSync("ls", [rig.outside], { encoding: "utf8" }).trim()).toBe("secret.txt");
  });

  test("a hard link to an outside file is neither read nor written", async () => {
    const victim = path.join(rig.outside, "hard-victim.txt");
    writeFileSync(victim, SECRET);
    linkSync(victim, path.join(rig.root, "hard.txt"));
    const seen = await outcomes([
      `moss.files.read("hard.txt")`,
      `moss.files.write("hard.txt", "pwned")`,
      `moss.files.append("hard.txt", "pwned")`,
    ]);
    for (const outcome of seen)
      expect(outcome).toMatch(/^FilesError:refused:hard\.txt: has other hard links/);
    expect(readFileSync(victim, "utf8")).toBe(SECRET);
  });

  test("a folder swapped for a link between check and use never leaks or writes outside", async () => {
    const real = path.join(rig.root, "swap");
    const parked = path.join(rig.root, "swap-parked");
    mkdirSync(real);
    writeFileSync(path.join(real, "secret.txt"), "inside");
    mkdirSync(parked);
    writeFileSync(path.join(parked, "secret.txt"), "inside");
    const link = path.join(rig.base, "swap-link");
    symlinkSync(rig.outside, link);
    let running = true;
    let swaps = 0;
    // The host flips `swap` between a real folder and a link to the outside folder while the model reads and writes.
    const flipper = (async () => {
      while (running) {
        try {
          renameSync(real, path.join(rig.base, "swap-real"));
          symlinkSync(rig.outside, real);
          await new Promise((resolve) => setImmediate(resolve));
          rmSync(real);
          renameSync(path.join(rig.base, "swap-real"), real);
          swaps++;
        } catch {}
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    const execution = await rig.run(`async function main(moss: Moss) {
  const seen: string[] = [];
  for (let round = 0; round < 100; round++) {
    try { seen.push(await moss.files.read("swap/secret.txt")); } catch (error) { seen.push((error as { code: string }).code); }
    try { await moss.files.write("swap/secret.txt", "inside"); seen.push("wrote"); } catch (error) { seen.push((error as { code: string }).code); }
    try { await moss.files.write("swap/new-" + round + ".txt", "planted"); seen.push("wrote"); } catch (error) { seen.push((error as { code: string }).code); }
    try { await moss.files.mkdir("swap/folder-" + round); seen.push("wrote"); } catch (error) { seen.push((error as { code: string }).code); }
    try { await moss.files.move("swap/new-" + round + ".txt", "swap/moved-" + round + ".txt"); seen.push("wrote"); } catch (error) { seen.push((error as { code: string }).code); }
  }
  return seen;
}`);
    running = false;
    await flipper;
    expect(swaps).toBeGreaterThan(0);
    expect(execution.error).toBeUndefined();
    const seen = execution.returns as string[];
    expect(seen).not.toContain(SECRET);
    for (const outcome of seen)
      expect(["inside", "wrote", "refused", "not-found", "exists", "not-a-directory"]).toContain(outcome);
    expect(readFileSync(path.join(rig.outside, "secret.txt"), "utf8")).toBe(SECRET);
    // Nothing was created, moved or written in the outside folder while it was reachable through the swapped link.
    const outsideNames = execFileSync("ls", [rig.outside], { encoding: "utf8" }).trim().split("\n");
    expect(outsideNames.filter((name) => name !== "secret.txt" && name !== "hard-victim.txt")).toEqual([]);
  });

  test("huge files, huge writes, huge listings and FIFOs stay within the limits and never hang", async () => {
    const huge = path.join(rig.root, "huge.bin");
    writeFileSync(huge, "");
    truncateSync(huge, 10 * 1024 * 1024 * 1024);
    mkdirSync(path.join(rig.root, "crowd"));
    for (let index = 0; index < 3000; index++) writeFileSync(path.join(rig.root, "crowd", `f${index}`), "");
    execFileSync("mkfifo", [path.join(rig.root, "pipe")]);
    const seen = await outcomes([
      `moss.files.read("huge.bin")`,
      `moss.files.write("big.txt", "x".repeat(2000))`,
      `moss.files.list("crowd").then((listing) => [listing.entries.length, listing.more])`,
      `moss.files.read("pipe")`,
      `moss.files.write("pipe", "x")`,
    ]);
    expect(seen[0]).toMatch(
      /^FilesError:too-large:huge\.bin: 10737418240 bytes is more than the limit of 1024 bytes$/,
    );
    expect(seen[1]).toMatch(/^FilesError:too-large:/);
    expect(seen[2]).toBe("ok:[100,true]");
    expect(seen[3]).toMatch(/^FilesError:not-a-file:/);
    expect(seen[4]).toMatch(/^FilesError:(not-a-file|failed):/);
  });

  test("the service's constructor and internals are out of reach", async () => {
    const execution = await rig.run(
      `async function main(moss: Moss) {
  const out: string[] = [];
  const files = moss.files as any;
  for (const probe of [
    () => new files.constructor("/").read("etc/passwd"),
    () => files.constructor.call(files, "/"),
    () => Object.getPrototypeOf(files).read.call({}, "x"),
  ]) {
    try { out.push("ok:" + String(await probe())); } catch (error) { out.push("blocked:" + (error as Error).name); }
  }
  return out;
}`,
    );
    expect(JSON.stringify(execution.returns ?? execution.error)).not.toMatch(/root:x:0|ok:/);
    const check = await rig.run(attempts([`moss.files.list()`]));
    expect((check.returns as string[])[0]).toMatch(/^ok:/);
  });
});
