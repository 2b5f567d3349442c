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
    // Files run one after another in each worker process, not each in a new one: a new process per file loaded
    // TypeScript, ts-morph, the engine and the lib's parse again (a full run 1,399 s → 1,211 s on two cores, issue
    // 25's CI row). So a test file restores what it changes of the process (environment variables, the working
    // directory, spies) in its own hooks, as every file here does, and a file that needs modules loaded afresh says
    // so itself (vi.resetModules, as serve-footprint.test.ts).
    isolate: false,
    setupFiles: ["test/helpers/fresh-shared-sandboxes.ts"],
    execArgv: ["--no-node-snapshot"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // vitest's default is one worker fewer than the cores: one file at a time on a 2-core CI machine, where most
    // files also wait on child processes, pipes and sockets. Two at least keep both cores busy.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // From the sources, moss-ts emits the public API's declarations on first use (engine/module-surface.ts): once
    // here; one `moss check` writes V8's code cache of TypeScript that type-check workers load. One PostgreSQL for
    // the run (MOSS_TEST_POSTGRES=1), a database of its own per file; one PGlite database made once, which tests
    // copy for a fresh one (freshPGliteDirectory).
    globalSetup: [
      "test/helpers/module-surface-setup.ts",
      "test/helpers/code-cache-setup.ts",
      "test/helpers/postgres-global-setup.ts",
      "test/helpers/pglite-template-setup.ts",
    ],
  },
});
