import { fileURLToPath } from "node:url";
import { runMoss } from "./moss-cli.ts";

/**
 * vitest's global setup: one `moss check` before any test file, so V8's code cache of TypeScript and ts-morph
 * (engine/enable-code-cache.ts, written by a CLI command's main thread at its exit) exists when the tests' type-check
 * workers start: on a clean machine each of them otherwise compiled TypeScript again until some CLI test ran. A
 * failure here only means no cache: the tests that check do it as before and report their own errors.
 */
export default async function setup(): Promise<void> {
  await runMoss(["check", "examples/sphero/context.ts", "--code", "-"], {
    input: "async function main(moss: Moss) {\n  return 1;\n}\n",
    cwd: fileURLToPath(new URL("../../", import.meta.url)),
  });
}
