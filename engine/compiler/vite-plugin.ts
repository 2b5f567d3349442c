import { readFile } from "node:fs/promises";
import { parseCompileUrl, withLocalsExport, withoutQuery } from "./module-url.ts";

/** The shape of a Vite plugin this needs (no dependency on vite's types). */
export interface MossVitePlugin {
  name: string;
  enforce: "pre";
  config(): { test: { server: { deps: { inline: string[] } } } };
  load(id: string): Promise<string | null>;
}

/**
 * The Vite plugin that lets vitest load context modules: add `mossVitePlugin()` to `plugins` in vitest.config.ts.
 * Under vitest, modules load through Vite, not Node's loader hooks. The plugin has vitest serve moss-ts itself
 * (an installed package is otherwise handed to Node, whose `import()` of a context module knows neither `.ts` on
 * Node 20 nor the compile query), so the module, the classes it imports and a test's fakes are the same instances;
 * and it serves `…/context.ts?moss-compile=N` imports the way the Node hooks do (engine/compiler/module-hooks.ts),
 * sharing their code; Vite compiles the result.
 */
export function mossVitePlugin(): MossVitePlugin {
  return {
    name: "moss-context-modules",
    enforce: "pre",
    config() {
      return { test: { server: { deps: { inline: ["moss-ts"] } } } };
    },
    async load(id) {
      const request = parseCompileUrl(id);
      if (request === undefined) return null;
      const source = request.source ?? (await readFile(withoutQuery(id), "utf8"));
      return withLocalsExport(source, request.names);
    },
  };
}
