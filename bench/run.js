// Entry of `npm run bench`: registers tsx's loader (as bin/moss.js does: `--import tsx` leaks its keepNames
// helper into function source evaluated in the isolate) and runs bench/main.ts with this process's arguments.
import { register } from "tsx/esm/api";
import { addSourceCondition } from "../scripts/source-condition.js";

// `import … from "moss-ts"` in the benchmarks' modules resolves to the sources ("moss-ts-source" in exports).
await addSourceCondition();
register();
globalThis[Symbol.for("moss-ts.tsx-registered")] = true;
const { main } = await import("./main.ts");
process.exitCode = await main(process.argv.slice(2));
