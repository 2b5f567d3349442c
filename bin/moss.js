#!/usr/bin/env -S node --no-node-snapshot
// The moss CLI. isolated-vm needs --no-node-snapshot on Node 20 (see the shebang). Startup stays light: from a
// build (dist/ beside bin/) the CLI is plain JavaScript and registers tsx only when a context module is loaded;
// from a source checkout tsx's loader is registered first, because the CLI itself is TypeScript there. Each
// command then imports only what it needs (engine/cli/main.ts).
import { existsSync } from "node:fs";

const built = new URL("../dist/engine/cli/main.js", import.meta.url);
let entry = built.href;
if (!existsSync(built)) {
  const { register } = await import("tsx/esm/api");
  register();
  globalThis[Symbol.for("moss-ts.tsx-registered")] = true;
  entry = new URL("../engine/cli/main.ts", import.meta.url).href;
}
const { main } = await import(entry);
process.exitCode = await main(process.argv.slice(2));
