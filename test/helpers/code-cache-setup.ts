import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const BIN = fileURLToPath(new URL("../../bin/moss.js", import.meta.url));
const MODULE = fileURLToPath(new URL("../../examples/sphero/context.ts", import.meta.url));

/**
 * vitest's global setup: one `moss check` before any test file, so V8's code cache of TypeScript and ts-morph
 * (engine/enable-code-cache.ts, written by a CLI command's main thread at its exit) exists when the tests' type-check
 * workers start: on a clean machine each of them otherwise compiled TypeScript again until some CLI test ran. A
 * failure here only means no cache: the tests that check do it as before and report their own errors.
 */
export default async function setup(): Promise<void> {
  const child = promisify(execFile)(
    process.execPath,
    ["--no-node-snapshot", BIN, "check", MODULE, "--code", "-"],
    {
      env: { ...process.env, VITEST: "", NO_COLOR: "1" },
    },
  );
  child.child.stdin?.end("async function main(moss: Moss) {\n  return 1;\n}\n");
  await child.catch(() => {});
}
