import { defineConfig } from "vitest/config";
import { mossVitePlugin } from "./engine/compiler/vite-plugin.ts";

export default defineConfig({
  // Context modules load through Vite under vitest: the plugin appends their locals export (no file is written).
  plugins: [mossVitePlugin()],
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    execArgv: ["--no-node-snapshot"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
