import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { withEsbuild } from "../esbuild-service.ts";
import { privateTempFolder, touchPrivateFile, writePrivateFile } from "../private-temp-folder.ts";

/*
 * The isolate half of the membrane (membrane/isolate/) as one self-contained classic script. `npm run build` writes
 * it beside this file in dist/ (`isolate.bundle.js`); running from source, it is bundled here on first use, once per
 * process, and kept in the temp folder under the hash of its sources so the next sandbox process reads it instead of
 * starting esbuild (a bundle of other sources can never be used). No function's `toString()` is shipped, so no loader's `__name` helpers can leak into it.
 */

/** The global name the bundle assigns its entry module to (local to the closure it is evaluated in). */
export const ISOLATE_SCRIPT_GLOBAL = "mossIsolate";

/** The esbuild options of the isolate script: the same whether it is bundled from source or by `npm run build`. */
export const ISOLATE_SCRIPT_BUILD = {
  bundle: true,
  format: "iife",
  globalName: ISOLATE_SCRIPT_GLOBAL,
  platform: "neutral",
  // The V8 of isolated-vm 5 on Node 20 and later: modern syntax is kept as written.
  target: "es2022",
  keepNames: false,
  minify: false,
  legalComments: "none",
  charset: "utf8",
  sourcemap: false,
} as const;

/** Where `npm run build` writes the script, beside this module in dist/. */
export const ISOLATE_SCRIPT_FILE = "isolate.bundle.js";

const FROM_SOURCE = import.meta.url.endsWith(".ts");
// `../membrane/` from here is this folder; it is also right from a worker entry bundled with its imports
// (runnable-entry.ts keeps the entry's own `import.meta.url`, a file of another engine/ folder).
const PREBUILT = new URL(`../membrane/${ISOLATE_SCRIPT_FILE}`, import.meta.url);
// From source the entry is TypeScript; in dist, tsc's JavaScript of it (used by the build to write PREBUILT).
const ENTRY = new URL(`../membrane/isolate/entry.${FROM_SOURCE ? "ts" : "js"}`, import.meta.url);

let cached: string | undefined;

/** The bundled isolate script (a classic script assigning `mossIsolate`), built or read once per process. */
export function isolateScript(): string {
  cached ??= loadIsolateScript();
  return cached;
}

function loadIsolateScript(): string {
  const prebuilt = fileURLToPath(PREBUILT);
  if (!FROM_SOURCE && existsSync(prebuilt)) return readFileSync(prebuilt, "utf8");
  // In dist/ without the built script (the build itself writing it), bundle tsc's JavaScript, uncached.
  const cache = FROM_SOURCE ? path.join(privateTempFolder(), `isolate-script-${sourceHash()}.js`) : undefined;
  if (cache !== undefined) {
    try {
      const text = readFileSync(cache, "utf8");
      touchPrivateFile(cache);
      return text;
    } catch {}
  }
  // esbuild is loaded here, not at import: only a process that runs isolates from source needs it.
  const result = withEsbuild((esbuild) =>
    esbuild.buildSync({ ...ISOLATE_SCRIPT_BUILD, entryPoints: [fileURLToPath(ENTRY)], write: false }),
  );
  const output = result.outputFiles[0];
  if (output === undefined) throw new Error("esbuild wrote no isolate script");
  if (cache === undefined) return output.text;
  try {
    writePrivateFile(cache, output.text);
  } catch {}
  return output.text;
}

/**
 * The hash of every file the isolate script may be built from: the membrane's isolate/ and wire/ folders,
 * protocol.ts and visibility.ts (scripts/check-arrows.js holds the isolate half to exactly these).
 */
function sourceHash(): string {
  const folder = path.dirname(path.dirname(fileURLToPath(ENTRY)));
  const files = ["protocol.ts", "visibility.ts"];
  for (const sub of ["isolate", "wire"]) {
    for (const name of readdirSync(path.join(folder, sub)).sort()) {
      if (name.endsWith(".ts")) files.push(path.join(sub, name));
    }
  }
  const hash = createHash("sha256").update(JSON.stringify(ISOLATE_SCRIPT_BUILD));
  for (const file of files) hash.update(`${file}\0${readFileSync(path.join(folder, file), "utf8")}\0`);
  return hash.digest("hex").slice(0, 32);
}

/**
 * The body of an `evalClosure` taking `$0` = the host-call bridge, `$1` = the emit bridge, `$2` = the done bridge and
 * `$3` = the batch bridge: the isolate script in strict mode, then its entry started with the bridges (returning the
 * entry points).
 */
export function isolateClosureSource(): string {
  return `"use strict";\n${isolateScript()}\nreturn ${ISOLATE_SCRIPT_GLOBAL}.start($0, $1, $2, $3);`;
}
