import { mkdir, readdir, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Project } from "ts-morph";
import { expect } from "vitest";
import { MossCompiler } from "../../../engine/compiler/moss-compiler.ts";
import { MODULE_COMPILER_OPTIONS } from "../../../engine/module/module-project.ts";
import { bindOpenApi } from "../../../moss-modules/openapi/index.ts";

const require = createRequire(import.meta.url);
/** The folder of `@readme/oas-examples`. */
export const OAS_EXAMPLES = path.dirname(require.resolve("@readme/oas-examples/package.json"));
const TEMPORARY = fileURLToPath(new URL("../../fixtures/.tmp/", import.meta.url));

/** Every document file of one OpenAPI version in `@readme/oas-examples` (json and yaml). */
export async function corpusFiles(version: "3.0" | "3.1", format: "json" | "yaml"): Promise<string[]> {
  const folder = path.join(OAS_EXAMPLES, version, format);
  const files: string[] = [];
  for (const name of (await readdir(folder)).sort()) {
    const file = path.join(folder, name);
    if ((await stat(file)).isFile()) files.push(file);
  }
  return files;
}

/**
 * Loads every file as a service of one context module, checks that the generated declarations type-check as a
 * program (strict), and that the module's prompt renders every service and a snippet using them type-checks.
 */
export async function checkCorpus(files: readonly string[]): Promise<void> {
  const folder = path.join(
    TEMPORARY,
    `oas-${process.pid}-${path.basename(path.dirname(path.dirname(files[0]!)))}-${path.basename(path.dirname(files[0]!))}`,
  );
  await mkdir(folder, { recursive: true });
  try {
    const compiler = new MossCompiler({ sandbox: "in-process" });
    const services: Array<{ name: string; file: string; method?: string }> = [];
    const failures: string[] = [];
    for (const file of files) {
      const name = serviceName(file);
      try {
        const binding = await bindOpenApi(compiler, name, file, {
          typesFile: path.join(folder, `${name}.api.ts`),
        });
        services.push({
          name,
          file,
          ...(binding.model.operations[0] ? { method: binding.model.operations[0].name } : {}),
        });
      } catch (error) {
        failures.push(`${path.basename(file)}: ${(error as Error).message}`);
      }
    }
    expect(failures).toEqual([]);

    const project = new Project({ compilerOptions: { ...MODULE_COMPILER_OPTIONS, noUnusedLocals: false } });
    for (const service of services) project.addSourceFileAtPath(path.join(folder, `${service.name}.api.ts`));
    const diagnostics = project.getPreEmitDiagnostics();
    expect(project.formatDiagnosticsWithColorAndContext(diagnostics.slice(0, 5))).toBe("");

    const context = [
      'import { Moss as Parent } from "moss-ts";',
      ...services.map((service) => `import type { ${service.name} } from "./${service.name}.api.ts";`),
      "export class Moss extends Parent {",
      ...services.map(
        (service) => `  ${service.name.charAt(0).toLowerCase()}${service.name.slice(1)}!: ${service.name};`,
      ),
      "}",
      "",
    ].join("\n");
    const modulePath = path.join(folder, "context.ts");
    await writeFile(modulePath, context);
    const runtime = await compiler.compile(modulePath);
    try {
      const prompt = await runtime.prompter().dumpModulePrompt();
      for (const service of services)
        expect(prompt).toMatch(new RegExp(`(?:interface|type) ${service.name}\\b`));
      const calls = services
        .filter((service) => service.method)
        .map(
          (service) =>
            `  void moss.${service.name.charAt(0).toLowerCase()}${service.name.slice(1)}.${service.method};`,
        );
      const snippet = `async function main(moss: Moss) {\n${calls.join("\n")}\n}`;
      expect(await runtime.typecheck(snippet)).toEqual([]);
    } finally {
      await runtime.close();
    }
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}

function serviceName(file: string): string {
  const base = path.basename(file).replace(/\.(json|ya?ml)$/, "");
  return base
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join("");
}
