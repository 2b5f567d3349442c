import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";
import { mossVitePlugin } from "./engine/compiler/vite-plugin.ts";

// "moss-ts-source": inside this repository, `import … from "moss-ts"` (examples, fixtures, tests) resolves to the
// TypeScript sources, never to a dist/ build that may be missing or stale (package.json `exports`). Vite's default
// "module" condition is left out: tests run on Node, and some packages' "module" builds are not valid Node ESM
// (@opentelemetry/api 1.9: extensionless imports), so packages load as Node itself would load them.
const conditions = ["moss-ts-source", "node", "development|production"];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ["moss-ts-source"] } },
  // Context modules load through Vite under vitest: the plugin appends their locals export (no file is written).
  plugins: [mossVitePlugin()],
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    execArgv: ["--no-node-snapshot"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // vitest's default is one worker fewer than the cores: one file at a time on a 2-core CI machine, where most
    // files also wait on child processes, pipes and sockets. Two at least keep both cores busy.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // From the sources, moss-ts emits the public API's declarations on first use (engine/module-surface.ts): once
    // here. One PostgreSQL for the run (MOSS_TEST_POSTGRES=1), a database of its own per file; one PGlite database
    // made once, which tests copy for a fresh one (freshPGliteDirectory).
    globalSetup: [
      "test/helpers/module-surface-setup.ts",
      "test/helpers/postgres-global-setup.ts",
      "test/helpers/pglite-template-setup.ts",
    ],
  },
});
