// APIs benchmark (issue 11): load + prompt time and prompt tokens of real OpenAPI documents, next to the same API
// as OpenAI function-calling JSON schemas; host overhead of one HTTP call through the membrane.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { countTokens } from "../engine/agent/index.ts";
import { MossCompiler } from "../engine/compiler/moss-compiler.ts";
import { MossError } from "../engine/errors.ts";
import { type ApiModel, bindOpenApi, loadOpenApi } from "../moss-modules/openapi/index.ts";
import { startPetServer } from "../test/moss-modules/openapi/pet-server.ts";
import { petsWorkspace } from "../test/moss-modules/openapi/plugin-workspace.ts";
import { formatMs, formatRatio, printTable, type Summary, summarize } from "./stats.ts";

const require = createRequire(import.meta.url);
const TEMPORARY = fileURLToPath(new URL("./.tmp/apis/", import.meta.url));
const DOCUMENTS = [
  { name: "PetStore", file: require.resolve("@readme/oas-examples/3.0/json/petstore.json") },
  { name: "StarTrek", file: require.resolve("@readme/oas-examples/3.0/json/star-trek.json") },
  { name: "GitHub", file: require.resolve("@octokit/openapi/generated/api.github.com.json") },
];
const CALLS_PER_RUN = 50;
const ROUNDS = 15;

/** The same API as OpenAI function-calling tools: one function per operation, `$ref`s inlined (tools allow none). */
function functionCallingTools(model: ApiModel): object[] {
  const inline = (schema: unknown, depth: number): unknown => {
    if (depth > 8 || typeof schema !== "object" || schema === null) return schema;
    if (Array.isArray(schema)) return schema.map((item) => inline(item, depth + 1));
    const record = schema as Record<string, unknown>;
    if (typeof record.$ref === "string") return inline(model.resolve(record.$ref), depth + 1);
    return Object.fromEntries(Object.entries(record).map(([key, value]) => [key, inline(value, depth + 1)]));
  };
  return model.operations.map((operation) => {
    const properties: Record<string, unknown> = {};
    const required: string[] = [];
    for (const parameter of operation.parameters) {
      properties[parameter.key] = {
        ...((inline(parameter.schema ?? {}, 0) as object) ?? {}),
        ...(parameter.description ? { description: parameter.description } : {}),
      };
      if (parameter.required) required.push(parameter.key);
    }
    if (operation.body) {
      properties[operation.body.key] = inline(operation.body.schema ?? {}, 0);
      if (operation.body.required) required.push(operation.body.key);
    }
    return {
      type: "function",
      function: {
        name: operation.name,
        description: operation.summary ?? operation.description ?? `${operation.method} ${operation.path}`,
        parameters: { type: "object", properties, required },
      },
    };
  });
}

async function documentRows(): Promise<string[][]> {
  rmSync(TEMPORARY, { recursive: true, force: true });
  mkdirSync(TEMPORARY, { recursive: true });
  const rows: string[][] = [];
  for (const { name, file } of DOCUMENTS) {
    const validateStarted = performance.now();
    // Validation refuses a document whose $refs expand too far (GitHub's): the time to refuse is the figure then.
    const validated = await loadOpenApi(file).then(
      () => true,
      (error: unknown) => {
        if (MossError.is(error, "schema-too-large")) return false;
        throw error;
      },
    );
    const validateMs = performance.now() - validateStarted;
    const compiler = new MossCompiler({ sandbox: "in-process" });
    const bindStarted = performance.now();
    const binding = await bindOpenApi(compiler, name, file, {
      typesFile: path.join(TEMPORARY, `${name}.api.ts`),
      validate: false,
    });
    const bindMs = performance.now() - bindStarted;
    const modulePath = path.join(TEMPORARY, `${name}-context.ts`);
    writeFileSync(
      modulePath,
      `import { Moss as Parent } from "moss-ts";\nimport type { ${name} } from "./${name}.api.ts";\nexport class Moss extends Parent { api!: ${name}; }\n`,
    );
    const compileStarted = performance.now();
    const runtime = await compiler.compile(modulePath);
    const prompt = await runtime.prompter().dumpModulePrompt();
    const compileMs = performance.now() - compileStarted;
    await runtime.close();
    const promptTokens = countTokens(prompt);
    const fullTokens = countTokens([...binding.declaration.parts.values()].join("\n"));
    const toolTokens = countTokens(JSON.stringify(functionCallingTools(binding.model)));
    rows.push([
      name,
      String(binding.model.operations.length),
      binding.declaration.searchable ? "search" : binding.declaration.compact ? "index" : "full",
      validated ? formatMs(validateMs) : `refused ${formatMs(validateMs)}`,
      formatMs(bindMs),
      formatMs(compileMs),
      String(promptTokens),
      String(fullTokens),
      String(toolTokens),
      formatRatio(promptTokens, toolTokens),
    ]);
  }
  rmSync(TEMPORARY, { recursive: true, force: true });
  return rows;
}

async function callRows(): Promise<string[][]> {
  const server = await startPetServer({ kind: "none" });
  const workspace = await petsWorkspace({ id: "pets", name: "Pets", description: "Pets." });
  const compiler = new MossCompiler({ sandbox: "in-process" });
  const binding = await bindOpenApi(compiler, "PetShelter", workspace.plugin, { serverUrl: server.url });
  const modulePath = path.join(workspace.folder, "context.ts");
  writeFileSync(
    modulePath,
    'import { Moss as Parent } from "moss-ts";\nimport type { PetShelter } from "./pets/pet-shelter.api.ts";\nexport class Moss extends Parent { pets!: PetShelter; }\n',
  );
  const runtime = await compiler.compile(modulePath);
  try {
    const service = binding.service as { getPet(args: { petId: number }): Promise<unknown> };
    const code = `async function main(moss: Moss) { for (let i = 0; i < ${CALLS_PER_RUN}; i++) await moss.pets.getPet({ petId: 1 }); }`;
    const variants: Array<() => Promise<void>> = [
      async () => {
        for (let index = 0; index < CALLS_PER_RUN; index++) {
          const response = await fetch(`${server.url}/pets/1`, { headers: { accept: "application/json" } });
          await response.json();
        }
      },
      async () => {
        for (let index = 0; index < CALLS_PER_RUN; index++) await service.getPet({ petId: 1 });
      },
      async () => {
        const execution = await runtime.execute({ code });
        if (!execution.ok) throw new Error(execution.error?.message);
      },
    ];
    // Rounds interleave the three paths so that load from elsewhere on the machine falls on all of them alike.
    const durations: number[][] = [[], [], []];
    for (let round = -3; round < ROUNDS; round++) {
      for (let offset = 0; offset < variants.length; offset++) {
        const index = (round + 3 + offset) % variants.length;
        const started = performance.now();
        await variants[index]!();
        if (round >= 0) durations[index]!.push(performance.now() - started);
      }
    }
    const [direct, host, membrane] = durations.map((values) => summarize(values)) as [
      Summary,
      Summary,
      Summary,
    ];
    const per = (value: number) => value / CALLS_PER_RUN;
    return [
      ["fetch on the host (baseline)", formatMs(per(direct.median)), "1.00×"],
      ["service method on the host", formatMs(per(host.median)), formatRatio(host.median, direct.median)],
      [
        "model code through the membrane",
        formatMs(per(membrane.median)),
        formatRatio(membrane.median, direct.median),
      ],
    ];
  } finally {
    await runtime.close();
    await workspace.cleanup();
    await server.close();
  }
}

/** Prints the APIs tables. */
export async function run(): Promise<void> {
  printTable(
    "OpenAPI documents: load, prompt and tokens (o200k) vs the same API as function-calling tools",
    [
      "document",
      "ops",
      "prompt",
      "validate",
      "bind",
      "compile+prompt",
      "prompt tok",
      "all decl tok",
      "tools JSON tok",
      "prompt/tools",
    ],
    await documentRows(),
    [
      "bind = parse + declaration + service (validation off); compile+prompt = MossCompiler.compile + dumpModulePrompt",
      "all decl tok = every operation and type declared in full (what describe() can return)",
    ],
  );
  printTable(
    `One HTTP call (GET /pets/{id} on 127.0.0.1), per call, ${CALLS_PER_RUN} calls per run`,
    ["path", "per call", "vs fetch"],
    await callRows(),
    ["the membrane figure includes the execute's own fixed cost divided over the calls of the run"],
  );
}
