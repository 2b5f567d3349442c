// moss-ts/openapi: OpenAPI documents and EulerCopilot plugin folders as typed services of a context module.
export type { ApiModel, ApiOperation, ApiParameter, ApiRequestBody, ApiResponse } from "./api-model.ts";
export { buildApiModel } from "./api-model.ts";
export type { Credential, Secret } from "./auth.ts";
export {
  type BindOpenApiOptions,
  bindOpenApi,
  type OpenApiBinding,
  openApiService,
} from "./bind-open-api.ts";
export {
  type DeclarationOptions,
  type GeneratedDeclaration,
  type OperationMatch,
  openApiDeclaration,
} from "./declaration.ts";
export { HttpError, OpenApiLoadError } from "./errors.ts";
export type { FlowDefinition, FlowStep, StepKind } from "./flows.ts";
export {
  type LoadedApi,
  type LoadOpenApiOptions,
  loadOpenApi,
  type OpenApiDocument,
} from "./load-document.ts";
export { createOpenApiService, type OpenApiServiceOptions, serverBaseUrl } from "./open-api-service.ts";
export type { PluginAuth, PluginManifest } from "./plugin-manifest.ts";
export { type Schema, schemaToType, type TypeWriterOptions } from "./schema-to-type.ts";
