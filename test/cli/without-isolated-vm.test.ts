import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { runMoss } from "../helpers/moss-cli.ts";

const MODULE = "examples/sphero/context.ts";
const SPIN = "async function main(moss: Moss) {\n  return 1;\n}\n";

// A Node on which no isolated-vm is installed (a Node line installed with the project's other line, or a failed
// build): every `require` of an isolated-vm release fails as a missing package does.
const NO_ISOLATED_VM = `const Module = require("node:module");
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (/^isolated-vm(-\\d+)?(\\/|$)/.test(request)) {
    const error = new Error("Cannot find module '" + request + "'");
    error.code = "MODULE_NOT_FOUND";
    throw error;
  }
  return resolve.call(this, request, ...rest);
};
`;

describe("moss-ts without an isolated-vm for this Node", () => {
  let temp: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    temp = await mkdtemp(path.join(tmpdir(), "moss-no-ivm-"));
    const hook = path.join(temp, "no-isolated-vm.cjs");
    await writeFile(hook, NO_ISOLATED_VM);
    env = { NODE_OPTIONS: `--require ${hook}`, TMPDIR: temp };
  });
  afterAll(async () => {
    await rm(temp, { recursive: true, force: true });
  });

  test("moss prompt and moss check work: they never load isolated-vm (a regression made every import of moss-ts load it)", async () => {
    const prompt = await runMoss(["prompt", MODULE, "--no-cache"], { env });
    expect(prompt.stderr).not.toContain("sandbox-failed");
    expect(prompt.code).toBe(0);
    expect(prompt.stdout).toContain("class Ball");
    const check = await runMoss(["check", MODULE, "--code", "-", "--no-cache"], { input: SPIN, env });
    expect(check).toMatchObject({ code: 0, stdout: "No errors.\n" });
  });

  test("moss run fails with sandbox-failed, naming the Node and what to install", async () => {
    const run = await runMoss(["run", MODULE, "--code", "-"], { input: SPIN, env });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain("error[sandbox-failed]");
    expect(run.stderr).toContain(`Node ${process.versions.node}`);
    expect(run.stderr).toContain("isolated-vm");
  });
});
