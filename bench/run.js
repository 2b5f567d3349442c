// Entry of `npm run bench`: registers tsx's loader (as bin/moss.js does: `--import tsx` leaks its keepNames
// helper into function source evaluated in the isolate) and runs bench/main.ts with this process's arguments.
import { register as registerHooks } from "node:module";
import { register } from "tsx/esm/api";

// `import … from "moss-ts"` in the benchmarks' modules resolves to the sources ("moss-ts-source" in exports).
registerHooks(
  `data:text/javascript,${encodeURIComponent(
    "export function resolve(specifier, context, next) {" +
      ' return next(specifier, { ...context, conditions: [...context.conditions, "moss-ts-source"] }); }',
  )}`,
);
register();
globalThis[Symbol.for("moss-ts.tsx-registered")] = true;
const { main } = await import("./main.ts");
process.exitCode = await main(process.argv.slice(2));
