#!/usr/bin/env -S node --no-node-snapshot
// The moss CLI. isolated-vm needs --no-node-snapshot on Node 20 (see the shebang); context modules are
// TypeScript, loaded through tsx's ESM loader registered here.
import { register } from "tsx/esm/api";

register();
globalThis[Symbol.for("moss-ts.tsx-registered")] = true;
const { main } = await import("../engine/cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
