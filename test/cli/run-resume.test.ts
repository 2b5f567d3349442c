import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { EXIT } from "../../engine/cli/exit-codes.ts";
import { runMoss } from "../helpers/moss-cli.ts";

// A paused `moss run` is kept and resumed, never run again from the top: the shop's host setup appends one line to
// a log file per call that really ran, so the tests count the calls across processes.
const SHOP = path.resolve("test/cli/fixtures/shop/context.ts");
const ORDER = `async function main(moss: Moss) {
  const order = await moss.shop.placeOrder("tea");
  console.log("ordered", order);
  return await moss.shop.deleteProduct(5);
}
`;

let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(path.join(tmpdir(), "moss-run-resume-"));
  await writeFile(path.join(directory, "order.ts"), ORDER);
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

const log = () => path.join(directory, "shop.log");
const calls = async () => (await readFile(log(), "utf8").catch(() => "")).split("\n").filter(Boolean);
const moss = (args: string[]) => runMoss(args, { cwd: directory, env: { MOSS_SHOP_LOG: log() } });
const answers = async (name: string, value: unknown) => {
  await writeFile(path.join(directory, name), JSON.stringify(value));
  return name;
};

describe("moss run keeps a paused run and resumes it", () => {
  test("--resume --answers goes on from the pause: the order placed before it is not placed again", async () => {
    const paused = await moss(["run", SHOP, "--code", "order.ts"]);
    expect(paused.code).toBe(EXIT.paused);
    expect(paused.stdout).toContain("ordered 1");
    expect(await calls()).toEqual(["order tea"]);
    // The exit-7 message prints the command that resumes, and answers that name the call the person saw.
    expect(paused.stderr).toContain(`moss run ${SHOP} --resume --answers <file.json>`);
    // Its id names this request of this run (`r<call>-<tag>`).
    const template = paused.stderr.match(
      /(\{"r2-[0-9a-f]{12}":\{"approved":true,"member":"shop.deleteProduct","args":\[5\]\}\})/,
    );
    expect(template).not.toBeNull();
    const kept = paused.stderr.match(/the paused run is kept in (\S+);/)?.[1];
    expect(kept).toBeDefined();
    expect(existsSync(kept!)).toBe(true);

    const file = await answers("answers.json", JSON.parse(template![1]!));
    const resumed = await moss(["run", SHOP, "--resume", "--answers", file]);
    expect(resumed.stderr).toBe("");
    expect(resumed.code).toBe(EXIT.ok);
    expect(resumed.stdout).toContain("returned: 'product 5'");
    expect(await calls()).toEqual(["order tea", "delete 5"]);
    expect(existsSync(kept!)).toBe(false);

    // Nothing is left to resume.
    const again = await moss(["run", SHOP, "--resume", "--answers", file]);
    expect(again.code).toBe(EXIT.input);
    expect(again.stderr).toMatch(/has no paused run to resume/);
    expect(await calls()).toEqual(["order tea", "delete 5"]);
  });

  test("the same command run again with --approve resumes the kept run instead of running it from the top", async () => {
    const paused = await moss(["run", SHOP, "--code", "order.ts", "--context", "session.json"]);
    expect(paused.code).toBe(EXIT.paused);
    // With a context file, the paused run is kept beside it.
    expect(existsSync(path.join(directory, "session.json.pending.json"))).toBe(true);
    const approved = await moss([
      "run",
      SHOP,
      "--code",
      "order.ts",
      "--context",
      "session.json",
      "--approve",
      "all",
    ]);
    expect(approved.code).toBe(EXIT.ok);
    expect(approved.stderr).toMatch(/resuming the run kept in .*session\.json\.pending\.json/);
    expect(await calls()).toEqual(["order tea", "delete 5"]);
    expect(existsSync(path.join(directory, "session.json.pending.json"))).toBe(false);
  });

  // The answers file goes with this one run: `r2` (the call's number, as ids were before they carried the run's tag)
  // still names its request.
  test("an answer given for another call than the one now waiting under its id runs nothing and says so", async () => {
    expect((await moss(["run", SHOP, "--code", "order.ts"])).code).toBe(EXIT.paused);
    const other = await answers("other.json", {
      r2: { approved: true, member: "shop.deleteProduct", args: [6] },
    });
    const refused = await moss(["run", SHOP, "--resume", "--answers", other]);
    expect(refused.code).toBe(EXIT.input);
    expect(refused.stderr).toContain("nothing ran");
    expect(refused.stderr).toContain("the answer was given for shop.deleteProduct(6), but #r2-");
    expect(refused.stderr).toMatch(/#r2-[0-9a-f]{12} now asks to approve shop\.deleteProduct\(5\)/);
    const renamed = await answers("renamed.json", { r2: { approved: true, member: "shop.placeOrder" } });
    expect((await moss(["run", SHOP, "--resume", "--answers", renamed])).code).toBe(EXIT.input);
    expect(await calls()).toEqual(["order tea"]);

    // The run is still kept: the right answer resumes it.
    const denied = await answers("deny.json", {
      r2: { approved: false, reason: "still sold", member: "shop.deleteProduct", args: [5] },
    });
    const resumed = await moss(["run", SHOP, "--resume", "--answers", denied]);
    expect(resumed.code).toBe(EXIT.failed);
    expect(resumed.stderr).toMatch(/ApprovalDenied.*still sold/s);
    expect(await calls()).toEqual(["order tea"]);
  });

  test("other code while a run is kept paused is refused, naming the kept run and how to go on", async () => {
    expect((await moss(["run", SHOP, "--code", "order.ts"])).code).toBe(EXIT.paused);
    await writeFile(
      path.join(directory, "other.ts"),
      'async function main(moss: Moss) { await moss.shop.placeOrder("jam"); }',
    );
    const refused = await moss(["run", SHOP, "--code", "other.ts", "--approve", "all"]);
    expect(refused.code).toBe(EXIT.input);
    expect(refused.stderr).toMatch(
      /a paused run of .* is kept in .*waiting for #r2-[0-9a-f]{12}.*--resume --answers <file>.*delete/s,
    );
    expect(await calls()).toEqual(["order tea"]);
    expect((await moss(["run", SHOP, "--resume", "--code", "other.ts"])).code).toBe(EXIT.usage);
  });
});
