import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { expect, test } from "vitest";
import { openApiService } from "../../../moss-modules/openapi/index.ts";
import { petsWorkspace } from "./plugin-workspace.ts";

const GOLDEN = fileURLToPath(new URL("./golden/pet-shelter.api.ts.txt", import.meta.url));

/** The generated declaration is prompt text: any change to it is a reviewed diff of this golden file. */
test("the pets plugin's generated declaration matches its golden file", async () => {
  const workspace = await petsWorkspace();
  try {
    // The plugin reads its key from PETS_API_KEY at bind time; the declaration never shows it.
    const binding = await openApiService("PetShelter", workspace.plugin, {
      credentials: { "X-Api-Key": "golden-test-key" },
    });
    if (process.env.UPDATE_GOLDEN) await writeFile(GOLDEN, binding.declaration.text);
    expect(binding.declaration.text).toBe(await readFile(GOLDEN, "utf8"));
  } finally {
    await workspace.cleanup();
  }
});
