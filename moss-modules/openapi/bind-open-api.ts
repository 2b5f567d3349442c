import path from "node:path";
import type { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import { MossError } from "../../engine/errors.ts";
import type { LanguageModel } from "../../engine/model/language-model.ts";
import { currentRunSignal } from "../../engine/runtime/run-signal.ts";
import { type ApiModel, buildApiModel, RESERVED_MEMBER_NAMES } from "./api-model.ts";
import { type GeneratedDeclaration, openApiDeclaration } from "./declaration.ts";
import {
  type LoadedApi,
  type LoadOpenApiOptions,
  loadOpenApi,
  type OpenApiDocument,
} from "./load-document.ts";
import { createOpenApiService, type OpenApiServiceOptions } from "./open-api-service.ts";
import { operationSearch } from "./operation-search.ts";
import { runFlow } from "./run-flow.ts";
import { SchemaTooLargeError } from "./schema-to-type.ts";
import { writeIfChanged } from "./write-if-changed.ts";

/** Options of `bindOpenApi` / `openApiService`. */
export interface BindOpenApiOptions extends OpenApiServiceOptions, LoadOpenApiOptions {
  /**
   * Where the generated declaration is written (a `.ts` file the context module imports with `import type`).
   * Default: `<plugin folder>/<name>.api.ts`, or `<document name>.api.ts` beside a document file. Required for a
   * document given as an object.
   */
  typesFile?: string;
  /** Past this many operations the prompt shows a compact index and `describe(name)`. Default 40. */
  maxOperations?: number;
  /** Past this many operations the prompt shows tags with counts and `search(query)` instead of the index. Default 200. */
  maxIndexOperations?: number;
  /** Operations declared in full even in compact form, by method name or operationId (an unknown one is an error). */
  include?: readonly string[];
  /** The model `llm` and `choice` steps of flows ask. Without it such steps fail with a clear error. */
  languageModel?: LanguageModel;
}

/** A service made from an OpenAPI document, with its generated declaration. */
export interface OpenApiBinding {
  /** The service type's name (the container token). */
  name: string;
  /** The host object to bind: one method per operation (and flow). */
  service: object;
  declaration: GeneratedDeclaration;
  /** Where the declaration was written, if it was. */
  typesFile?: string;
  /** Whether writing changed the file (a compile that already read the old file must be redone). */
  changed: boolean;
  model: ApiModel;
  loaded: LoadedApi;
}

/**
 * Loads a plugin folder or OpenAPI document, writes its TypeScript declaration to `typesFile` and returns the
 * service. Call it before `compile()`: the compiler reads the declaration when it analyses the context module.
 */
export async function openApiService(
  name: string,
  source: string | OpenApiDocument,
  options: BindOpenApiOptions = {},
): Promise<OpenApiBinding> {
  if (!/^[A-Z][A-Za-z0-9]*$/.test(name))
    throw new TypeError(`the service name must be a PascalCase identifier (got ${JSON.stringify(name)})`);
  const loaded = await loadOpenApi(source, options);
  const model = buildApiModel(loaded.document, name);
  for (const flow of loaded.flows) {
    if (
      model.operations.some((operation) => operation.name === flow.name) ||
      RESERVED_MEMBER_NAMES.has(flow.name)
    )
      throw new TypeError(`${flow.file}: flow name "${flow.name}" is also an operation or reserved name`);
  }
  let declaration: GeneratedDeclaration;
  try {
    declaration = openApiDeclaration(model, {
      name,
      ...(loaded.plugin ? { plugin: loaded.plugin } : {}),
      flows: loaded.flows,
      ...(options.maxOperations !== undefined ? { maxOperations: options.maxOperations } : {}),
      ...(options.maxIndexOperations !== undefined ? { maxIndexOperations: options.maxIndexOperations } : {}),
      ...(options.include ? { include: options.include } : {}),
    });
  } catch (error) {
    if (!(error instanceof SchemaTooLargeError)) throw error;
    const where = loaded.file ?? `the ${name} document`;
    throw new MossError(
      "schema-too-large",
      `${where}: ${error.refs[0] ?? "a schema"}: ${error.message}`,
      { file: loaded.file, refs: error.refs },
      { cause: error },
    );
  }
  const { service, call, checkCredentials } = createOpenApiService(model, {
    ...options,
    ...(loaded.plugin?.auth ? { pluginAuth: loaded.plugin.auth } : {}),
  });
  // A credential the host cannot read fails the bind, not the model's first call.
  checkCredentials();
  for (const flow of loaded.flows) {
    Object.defineProperty(service, flow.name, {
      value: (args?: unknown) => {
        // Every step's request ends with the run that called the flow.
        const runSignal = currentRunSignal();
        return runFlow(flow, args, {
          model,
          call: (operation, values) => call(operation, values, runSignal),
          languageModel: options.languageModel,
        });
      },
      enumerable: true,
    });
  }
  if (declaration.compact) {
    Object.defineProperty(service, "describe", {
      value: (member: unknown) => describeMember(declaration, String(member)),
      enumerable: true,
    });
  }
  if (declaration.searchable) {
    Object.defineProperty(service, "search", {
      value: operationSearch(model, declaration.signatures),
      enumerable: true,
    });
  }
  const typesFile = options.typesFile ?? defaultTypesFile(name, source, loaded);
  const changed = typesFile ? await writeIfChanged(typesFile, declaration.text) : false;
  return { name, service, declaration, ...(typesFile ? { typesFile } : {}), changed, model, loaded };
}

/** `openApiService`, then binds the service to `name` in the compiler's container (`moss.petstore!: PetStore`). */
export async function bindOpenApi(
  compiler: MossCompiler,
  name: string,
  source: string | OpenApiDocument,
  options: BindOpenApiOptions = {},
): Promise<OpenApiBinding> {
  const binding = await openApiService(name, source, options);
  compiler.bind(name, binding.service);
  return binding;
}

function describeMember(declaration: GeneratedDeclaration, name: string): string {
  const text = declaration.parts.get(name);
  if (text !== undefined) return text.replace(/^ {2}/gm, "");
  const lower = name.toLowerCase();
  const close = [...declaration.parts.keys()].filter((key) => key.toLowerCase().includes(lower)).slice(0, 10);
  throw new Error(
    `no operation or type named ${JSON.stringify(name)}${close.length ? ` (did you mean ${close.join(", ")}?)` : ""}`,
  );
}

function defaultTypesFile(
  name: string,
  source: string | OpenApiDocument,
  loaded: LoadedApi,
): string | undefined {
  if (typeof source !== "string") return undefined;
  const file = `${kebab(name)}.api.ts`;
  if (loaded.folder) return path.join(loaded.folder, file);
  return path.join(path.dirname(source), file);
}

function kebab(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, "$1-$2").toLowerCase();
}
