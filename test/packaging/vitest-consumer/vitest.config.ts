import { mossVitePlugin } from "moss-ts";
import { defineConfig } from "vitest/config";

// A user's config: the plugin, and time for a first compile (it builds a type-checker).
export default defineConfig({
  plugins: [mossVitePlugin()],
  test: { include: ["*.spec.ts"], testTimeout: 120_000 },
});
