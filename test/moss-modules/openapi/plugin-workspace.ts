import { cp, mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MossCompiler } from "../../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../../engine/runtime/moss-runtime.ts";
import {
  type BindOpenApiOptions,
  bindOpenApi,
  type OpenApiBinding,
} from "../../../moss-modules/openapi/index.ts";

const PETS_FIXTURE = fileURLToPath(new URL("./fixtures/pets/", import.meta.url));
const TEMPORARY = fileURLToPath(new URL("../../fixtures/.tmp/", import.meta.url));
let counter = 0;

/** The context module every pets test compiles: `moss.pets` is the plugin's service. */
export const PETS_CONTEXT = `import { Moss as Parent } from "moss-ts";
import type { PetShelter } from "./pets/pet-shelter.api.ts";

/** You help the shelter's visitors. */
export class Moss extends Parent {
  /** The shelter's API. */
  pets!: PetShelter;
}
`;

/** A copy of the pets plugin folder in a fresh folder (so generated files and plugin.json edits stay local). */
export async function petsWorkspace(
  pluginJson?: object,
): Promise<{ folder: string; plugin: string; cleanup(): Promise<void> }> {
  const folder = path.join(TEMPORARY, `openapi-${process.pid}-${++counter}`);
  const plugin = path.join(folder, "pets");
  await mkdir(folder, { recursive: true });
  await cp(PETS_FIXTURE, plugin, { recursive: true });
  if (pluginJson) await writeFile(path.join(plugin, "plugin.json"), JSON.stringify(pluginJson, null, 2));
  return { folder, plugin, cleanup: () => rm(folder, { recursive: true, force: true }) };
}

/** Binds the pets plugin (served at `serverUrl`) and compiles `PETS_CONTEXT` beside it, in-process. */
export async function compilePets(
  options: BindOpenApiOptions & {
    pluginJson?: object;
    context?: string;
    sandbox?: "in-process" | "process";
    typeCheck?: "strict" | "warn" | "off";
    /** More files for the plugin folder, e.g. \`{ "flows/x.yaml": "..." }\`. */
    files?: Record<string, string>;
  },
): Promise<{ runtime: MossRuntime; binding: OpenApiBinding; cleanup(): Promise<void> }> {
  const workspace = await petsWorkspace(options.pluginJson);
  for (const [name, text] of Object.entries(options.files ?? {})) {
    await mkdir(path.dirname(path.join(workspace.plugin, name)), { recursive: true });
    await writeFile(path.join(workspace.plugin, name), text);
  }
  const compiler = new MossCompiler({
    sandbox: options.sandbox ?? "in-process",
    typeCheck: options.typeCheck ?? "strict",
  });
  const binding = await bindOpenApi(compiler, "PetShelter", workspace.plugin, options);
  const modulePath = path.join(workspace.folder, "context.ts");
  await writeFile(modulePath, options.context ?? PETS_CONTEXT);
  const runtime = await compiler.compile(modulePath);
  return {
    runtime,
    binding,
    cleanup: async () => {
      await runtime.close();
      await workspace.cleanup();
    },
  };
}
