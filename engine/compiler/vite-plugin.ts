import { readFile } from "node:fs/promises";
import { parseCompileUrl, withLocalsExport, withoutQuery } from "./module-url.ts";

/** The shape of a Vite plugin this needs (no dependency on vite's types). */
export interface MossVitePlugin {
  name: string;
  enforce: "pre";
  load(id: string): Promise<string | null>;
}

/**
 * The Vite plugin that lets vitest load context modules: under vitest modules load through Vite, not Node's loader
 * hooks, so add `mossVitePlugin()` to `plugins` in vitest.config.ts. It serves `…/context.ts?moss-compile=N`
 * imports the way the Node hooks do (engine/compiler/module-hooks.ts), sharing their code; Vite compiles the result.
 */
export function mossVitePlugin(): MossVitePlugin {
  return {
    name: "moss-context-modules",
    enforce: "pre",
    async load(id) {
      const request = parseCompileUrl(id);
      if (request === undefined) return null;
      const source = request.source ?? (await readFile(withoutQuery(id), "utf8"));
      return withLocalsExport(source, request.names);
    },
  };
}
