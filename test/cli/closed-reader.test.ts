import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect, test } from "vitest";

const BIN = fileURLToPath(new URL("../../bin/moss.js", import.meta.url));
const TWIRL = "async function main(moss: Moss) {\n  return moss.body.twirl();\n}\n";

test("a reader that closes stdout early (`moss check … | head -1`) ends nothing but the output: the check exits with its own code, no EPIPE stack", async () => {
  const child = spawn(
    process.execPath,
    ["--no-node-snapshot", BIN, "check", "examples/sphero/context.ts", "--code", "-", "--no-cache"],
    { env: { ...process.env, VITEST: "", NO_COLOR: "1" }, stdio: ["pipe", "pipe", "pipe"] },
  );
  child.stdin.end(TWIRL);
  // The reader goes away before anything is printed, as `head` does once it has its lines.
  child.stdout.destroy();
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  expect(stderr).not.toContain("EPIPE");
  expect(stderr).not.toContain("internal error");
  expect(code).toBe(1);
});
