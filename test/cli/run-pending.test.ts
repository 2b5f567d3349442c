// `moss run` with code that pauses (issue 10): the real binary in a child process, stdin a pipe (no one to ask).
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EXIT } from "../../engine/cli/exit-codes.ts";

const SPHERO = "examples/sphero/context.ts";
let directory: string;
beforeAll(async () => {
  directory = await mkdtemp(path.join(tmpdir(), "moss-run-pending-"));
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

async function moss(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = promisify(execFile)(process.execPath, ["--no-node-snapshot", "bin/moss.js", ...args], {
    env: { ...process.env, VITEST: "", NO_COLOR: "1" },
    maxBuffer: 16 * 1024 * 1024,
  });
  child.child.stdin?.end();
  try {
    const { stdout, stderr } = await child;
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

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
});
