// `node scripts/source-launch.js <entry.ts> [arguments…]`: starts one of moss-ts's TypeScript entries from its sources
// (a checkout) as bin/moss.js starts the CLI from them: `import … from "moss-ts"` resolves to the sources
// ("moss-ts-source"), then tsx loads TypeScript. A process the engine starts from its sources uses it (the server's
// module proof); from dist/ the same entry is started as built JavaScript.
import { pathToFileURL } from "node:url";
import { addSourceCondition } from "./source-condition.js";

const [entry] = process.argv.splice(2, 1);
if (entry === undefined) {
  process.stderr.write("usage: node scripts/source-launch.js <entry.ts> [arguments…]\n");
  process.exit(2);
}
await addSourceCondition();
const { register } = await import("tsx/esm/api");
register();
globalThis[Symbol.for("moss-ts.tsx-registered")] = true;
await import(pathToFileURL(entry).href);
