import { enableCodeCache } from "../enable-code-cache.ts";

/** Imports the compiler (and with it TypeScript) for a CLI command, from V8's code cache where one was kept. */
export async function loadCompiler(): Promise<typeof import("../compiler/index.ts")> {
  enableCodeCache();
  return import("../compiler/index.ts");
}
