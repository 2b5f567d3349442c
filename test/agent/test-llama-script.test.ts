// scripts/test-llama.mjs (npm run test:llama) without building llama.cpp: argument handling, the clear errors,
// and its start/health/agents steps against a stand-in llama-server (test/agent/fixtures/fake-llama-server.mjs).
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

const SCRIPT = resolve("scripts/test-llama.mjs");
const FAKE_SERVER = resolve("test/agent/fixtures/fake-llama-server.mjs");
let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-llama-test-"));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

function script(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, [SCRIPT, ...args], {
      env: { PATH: process.env.PATH ?? "", HOME: directory, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (out += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolveRun({ code, out }));
  });
}

async function model(bytes = "GGUF\u0003\u0000\u0000\u0000"): Promise<string> {
  const path = join(directory, "model.gguf");
  await writeFile(path, bytes, "latin1");
  return path;
}

describe("npm run test:llama", () => {
  it("needs a model, names a missing or non-GGUF file, and rejects bad numbers (exit 2)", async () => {
    const none = await script([]);
    expect(none.code).toBe(2);
    expect(none.out).toContain("no model: pass --model <file.gguf> or set MOSS_LLAMA_MODEL");
    const missing = await script(["--model", join(directory, "nope.gguf")]);
    expect(missing.code).toBe(2);
    expect(missing.out).toContain("nope.gguf does not exist");
    const text = await script(["--model", await model("hello")]);
    expect(text.code).toBe(2);
    expect(text.out).toContain("is not a GGUF model file");
    const bad = await script(["--model", await model(), "--ctx-size", "0"]);
    expect(bad.code).toBe(2);
    expect(bad.out).toContain('--ctx-size needs a positive integer, got "0"');
  });

  it("says which build tools are missing (exit 1) instead of failing inside cmake", async () => {
    const onlyNode = join(directory, "bin");
    await rm(onlyNode, { recursive: true, force: true });
    const { mkdir, symlink } = await import("node:fs/promises");
    await mkdir(onlyNode);
    await symlink(process.execPath, join(onlyNode, "node"));
    const result = await script(["--model", await model()], { PATH: onlyNode });
    expect(result.code).toBe(1);
    expect(result.out).toMatch(/building llama-server needs cmake .*git .*a C\+\+ compiler/);
    expect(result.out).toContain("--llama-server <path>");
  });

  it("a dry run with an empty cache plans the install and the runs, building nothing", async () => {
    const cache = join(directory, "cache");
    const result = await script(["--model", await model(), "--dry-run", "--cache", cache]);
    expect(result.code).toBe(0);
    expect(result.out).toContain(`a real run installs it into ${join(cache, "npm")}`);
    expect(result.out).toContain("and run: sphero, todo");
  });

  // Two `moss agent` processes boot here (tsx, compile, sandbox): minutes on a loaded 2-core machine.
  it("starts the server, waits for /health, runs both agents and reports their stop reasons", {
    timeout: 300_000,
  }, async () => {
    const result = await script([
      "--model",
      await model(),
      "--llama-server",
      FAKE_SERVER,
      "--max-steps",
      "3",
      "--cache",
      join(directory, "cache"),
    ]);
    expect(result.out).toContain("── code · step 1 ──");
    expect(result.out).toContain("<stdout>\nlooked\n</stdout>");
    expect(result.out).toContain("[test:llama] sphero: exit 0 (answer)");
    expect(result.out).toContain("[test:llama] todo: exit 0 (answer)");
    expect(result.code).toBe(0);
  });
});
