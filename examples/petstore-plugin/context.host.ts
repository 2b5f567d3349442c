import path from "node:path";
import { fileURLToPath } from "node:url";
import type { MossCompiler } from "moss-ts";
import { bindOpenApi } from "moss-ts/openapi";

const PLUGIN = fileURLToPath(new URL("./plugin/", import.meta.url));

/**
 * Host setup used by `moss agent`, `moss serve`, `moss test --host` and the demo: binds the plugin as `PetStore`. The server is
 * `$PETSTORE_URL` (else the document's servers[0]); the key comes from `$PETSTORE_API_KEY`, which plugin.json
 * names, and never reaches the model.
 */
export async function setup(compiler: MossCompiler): Promise<void> {
  await bindOpenApi(compiler, "PetStore", path.resolve(PLUGIN), {
    ...(process.env.PETSTORE_URL ? { serverUrl: process.env.PETSTORE_URL } : {}),
    timeoutMs: 10_000,
  });
}
