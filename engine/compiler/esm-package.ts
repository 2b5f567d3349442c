import { readFile } from "node:fs/promises";
import path from "node:path";

/**
 * Why `modulePath` would not load as an ES module, with what to do, or undefined when it sits in an ES module
 * package (nearest package.json has `"type": "module"`) or has an ES-only extension (`.mts`, `.mjs`).
 */
export async function esmPackageProblem(modulePath: string): Promise<string | undefined> {
  const extension = path.extname(modulePath);
  if (extension === ".mts" || extension === ".mjs") return undefined;
  const absolute = path.resolve(modulePath);
  for (let directory = path.dirname(absolute); ; directory = path.dirname(directory)) {
    const candidate = path.join(directory, "package.json");
    let text: string;
    try {
      text = await readFile(candidate, "utf8");
    } catch {
      if (path.dirname(directory) === directory) break;
      continue;
    }
    let type: unknown;
    try {
      type = (JSON.parse(text) as { type?: unknown }).type;
    } catch {
      return `${candidate} is not valid JSON, so ${modulePath} and the files it imports cannot be loaded as ES modules: fix it and keep "type": "module" in it.`;
    }
    if (type === "module") return undefined;
    return `${modulePath} is not in an ES module package: the nearest package.json, ${candidate}, has ${type === undefined ? 'no "type"' : `"type": ${JSON.stringify(type)}`}, so TypeScript files there load as CommonJS. Context modules and the files they import are ES modules: add "type": "module" to ${candidate}.`;
  }
  return `${modulePath} is not in an ES module package: there is no package.json in ${path.dirname(absolute)} or any folder above it, so TypeScript files there load as CommonJS. Context modules and the files they import are ES modules: create ${path.join(path.dirname(absolute), "package.json")} containing { "type": "module" }.`;
}
