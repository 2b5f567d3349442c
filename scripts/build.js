// `npm run build` (and `prepack`): compiles the public source folders (engine/, container/) to dist/ (ES modules, .d.ts, declaration and
// source maps) with the project's TypeScript, then copies the files tsc does not emit but the engine reads at run
// time (hand-written .d.ts such as the vendored isolated-vm types, and any other non-TypeScript asset) to the same
// place under dist/, so code in dist finds them relative to its own `import.meta.url`.
// `--out-dir <folder>` builds there instead of dist/ (the CLI benchmark builds the published layout in bench/.tmp).
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const outDirIndex = process.argv.indexOf("--out-dir");
const outDir = outDirIndex === -1 ? "dist" : process.argv[outDirIndex + 1];
if (!outDir || outDir.startsWith("-")) {
  console.error("usage: node scripts/build.js [--out-dir <folder>]");
  process.exit(2);
}
const dist = path.resolve(root, outDir);
const buildConfig = path.join(root, "tsconfig.build.json");
/** The source folders: tsconfig.build.json's `include` (one list; a new public subpath adds its folder there). */
const sources = JSON.parse(readFileSync(buildConfig, "utf8")).include;

rmSync(dist, { recursive: true, force: true });
const typescript = path.dirname(createRequire(import.meta.url).resolve("typescript/package.json"));
const tsc = path.join(typescript, "bin", "tsc");
const compiled = spawnSync(process.execPath, [tsc, "-p", buildConfig, "--outDir", dist], {
  stdio: "inherit",
});
if (compiled.status !== 0) process.exit(compiled.status ?? 1);

let copied = 0;
for (const folder of sources) {
  for (const entry of readdirSync(path.join(root, folder), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !needsCopy(entry.name)) continue;
    const from = path.join(entry.parentPath, entry.name);
    const to = path.join(dist, path.relative(root, from));
    mkdirSync(path.dirname(to), { recursive: true });
    cpSync(from, to);
    copied++;
  }
}
// The isolate half of the membrane as one classic script (engine/membrane/isolate-script.ts reads it in dist/).
const isolate = await import(path.join(dist, "engine", "membrane", "isolate-script.js"));
writeFileSync(path.join(dist, "engine", "membrane", isolate.ISOLATE_SCRIPT_FILE), isolate.isolateScript());
console.error(
  `${path.relative(root, dist) || dist}/ built; ${copied} file(s) tsc does not emit copied beside the output; the isolate script bundled`,
);

/** Declaration files and assets: everything in the source folders tsc does not compile itself. */
function needsCopy(name) {
  if (/\.d\.[cm]?ts$/.test(name)) return true;
  return !/\.[cm]?tsx?$/.test(name);
}
