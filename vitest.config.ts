import { readFile } from "node:fs/promises";
import type { Plugin } from "vitest/config";
import { defineConfig } from "vitest/config";
import { parseCompileUrl, withLocalsExport, withoutQuery } from "./engine/compiler/module-url.ts";

/**
 * Under vitest modules load through Vite, not Node's loader hooks: this serves context-module imports
 * (`…/context.ts?moss-compile=N&…`) the way engine/compiler/module-hooks.ts does, sharing its code.
 */
function mossContextModules(): Plugin {
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

export default defineConfig({
  plugins: [mossContextModules()],
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    execArgv: ["--no-node-snapshot"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
