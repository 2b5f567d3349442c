// `node scripts/code-size.js [--root <dir>] [--json]`: the sizes issue 25 set bounds on, for the sources (engine/,
// container/, client/, moss-modules/): lines in all, the files over 800 lines and the functions over 250 lines (a
// function's lines from its first token to its closing brace, nested functions counted inside their parent too).
// Exits 1 when a file or a function is over its bound; test/architecture/code-size.test.ts holds the same.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ts } from "ts-morph";

export const SOURCE_FOLDERS = ["engine", "container", "client", "moss-modules"];
export const MAX_FILE_LINES = 800;
export const MAX_FUNCTION_LINES = 250;

/** Lines of every source file, and the files and functions over their bounds. */
export function codeSizes(root) {
  const files = [];
  const walk = (folder) => {
    for (const name of readdirSync(folder).sort()) {
      const file = path.join(folder, name);
      if (statSync(file).isDirectory()) walk(file);
      else if (/\.(ts|js|mjs)$/.test(name) && !name.endsWith(".d.ts")) files.push(file);
    }
  };
  for (const folder of SOURCE_FOLDERS) if (existsSync(path.join(root, folder))) walk(path.join(root, folder));
  let lines = 0;
  const largeFiles = [];
  const largeFunctions = [];
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    const count = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
    const relative = path.relative(root, file).split(path.sep).join("/");
    lines += count;
    if (count > MAX_FILE_LINES) largeFiles.push({ file: relative, lines: count });
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const visit = (node) => {
      if (ts.isFunctionLike(node) && node.body !== undefined) {
        const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const last = source.getLineAndCharacterOfPosition(node.end).line;
        if (last - first + 1 > MAX_FUNCTION_LINES) {
          largeFunctions.push({
            file: relative,
            name: node.name?.getText(source) ?? "(anonymous)",
            lines: last - first + 1,
          });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return { files: files.length, lines, largeFiles, largeFunctions };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf("--root");
  const root =
    at === -1
      ? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
      : path.resolve(process.argv[at + 1]);
  const sizes = codeSizes(root);
  if (process.argv.includes("--json")) console.log(JSON.stringify(sizes, null, 2));
  else {
    console.log(`code-size: ${sizes.lines} lines in ${sizes.files} source files`);
    console.log(`code-size: ${sizes.largeFiles.length} file(s) over ${MAX_FILE_LINES} lines`);
    for (const { file, lines } of sizes.largeFiles) console.log(`  ${file} ${lines}`);
    console.log(`code-size: ${sizes.largeFunctions.length} function(s) over ${MAX_FUNCTION_LINES} lines`);
    for (const { file, name, lines } of sizes.largeFunctions) console.log(`  ${file} ${name} ${lines}`);
  }
  process.exitCode = sizes.largeFiles.length + sizes.largeFunctions.length > 0 ? 1 : 0;
}
