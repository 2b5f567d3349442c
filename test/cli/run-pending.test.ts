import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EXIT } from "../../engine/cli/exit-codes.ts";
import { runMoss } from "../helpers/moss-cli.ts";

const SPHERO = path.resolve("examples/sphero/context.ts");
let directory: string;
beforeAll(async () => {
  directory = await mkdtemp(path.join(tmpdir(), "moss-run-pending-"));
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

const moss = (args: string[]) => runMoss(args, { cwd: directory });

const SPRINT = `async function main(moss: Moss) {
  console.log("before");
  await moss.body.sprint(90, 2);
  return moss.body.history().map((move) => move.speed);
}`;

describe("moss run with a run that pauses", () => {
  test("without answers it lists the requests and exits 7; --approve all and --answers resume it", async () => {
    const code = path.join(directory, "sprint.ts");
    await writeFile(code, SPRINT);
    const paused = await moss(["run", SPHERO, "--code", code, "--sandbox", "in-process"]);
    expect(paused.code).toBe(EXIT.paused);
    expect(paused.stdout).toContain("before");
    expect(paused.stderr).toMatch(/the run paused/);
    expect(paused.stderr).toMatch(/r1.*body\.sprint/s);

    const approved = await moss([
      "run",
      SPHERO,
      "--code",
      code,
      "--sandbox",
      "in-process",
      "--approve",
      "all",
    ]);
    expect(approved.stderr).not.toMatch(/paused/);
    expect(approved.code).toBe(EXIT.ok);
    expect(approved.stdout).toContain("[ 255 ]");
    expect(approved.stdout.match(/before/g)).toHaveLength(1);

    const answers = path.join(directory, "answers.json");
    await writeFile(answers, JSON.stringify({ r1: { approved: false, reason: "not indoors" } }));
    const denied = await moss([
      "run",
      SPHERO,
      "--code",
      code,
      "--sandbox",
      "in-process",
      "--answers",
      answers,
    ]);
    expect(denied.code).toBe(EXIT.failed);
    expect(denied.stdout + denied.stderr).toMatch(/ApprovalDenied.*not indoors/s);
  });

  test("--resume names the code's own file in an error's frame, as the run that paused did", async () => {
    const code = path.join(directory, "sprint-then-throw.ts");
    await writeFile(
      code,
      'async function main(moss: Moss) {\n  await moss.body.sprint(90, 2);\n  throw new Error("after the sprint");\n}',
    );
    const context = path.join(directory, "resume-context.json");
    const paused = await moss([
      "run",
      SPHERO,
      "--code",
      code,
      "--context",
      context,
      "--sandbox",
      "in-process",
    ]);
    expect(paused.code).toBe(EXIT.paused);
    const resumed = await moss([
      "run",
      SPHERO,
      "--context",
      context,
      "--resume",
      "--approve",
      "all",
      "--sandbox",
      "in-process",
    ]);
    expect(resumed.code).toBe(EXIT.failed);
    expect(resumed.stdout + resumed.stderr).toContain("after the sprint");
    expect(resumed.stdout + resumed.stderr).toContain("sprint-then-throw.ts");
    expect(resumed.stdout + resumed.stderr).not.toContain("<stdin>");
  });
});
