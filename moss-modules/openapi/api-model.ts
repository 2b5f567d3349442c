import type { OpenApiDocument } from "./load-document.ts";
import type { Schema } from "./schema-to-type.ts";

/** Where a parameter goes. */
export type ParameterLocation = "path" | "query" | "header" | "cookie";

/** One parameter of an operation, as the generated argument object names it. */
export interface ApiParameter {
  /** The name on the wire. */
  name: string;
  /** The property of the argument object that carries it. */
  key: string;
  in: ParameterLocation;
  required: boolean;
  schema?: Schema;
  description?: string;
  deprecated: boolean;
  /** `style: form` arrays/objects are exploded unless `explode: false`. */
  explode: boolean;
}

/** The request body an operation takes. */
export interface ApiRequestBody {
  key: string;
  required: boolean;
  mediaType: string;
  schema?: Schema;
  description?: string;
}

/** The success response an operation's return type comes from. */
export interface ApiResponse {
  status: string;
  mediaType?: string;
  schema?: Schema;
  description?: string;
}

/** One security requirement alternative: scheme name → scopes. All schemes of one alternative apply together. */
export type SecurityRequirement = Record<string, string[]>;

/** One operation, ready to declare and to call. */
export interface ApiOperation {
  /** The method name on the service (valid identifier, unique). */
  name: string;
  method: string;
  path: string;
  operationId?: string;
  summary?: string;
  description?: string;
  tags: string[];
  deprecated: boolean;
  parameters: ApiParameter[];
  body?: ApiRequestBody;
  response?: ApiResponse;
  /** Effective security (the operation's, else the document's); empty means none. */
  security: SecurityRequirement[];
}

/** The document seen as operations and named schemas. */
export interface ApiModel {
  document: OpenApiDocument;
  operations: ApiOperation[];
  /** `#/components/schemas/X` → the TypeScript name it is declared as. */
  schemaNames: Map<string, string>;
  /** Resolves a local `$ref` (`#/…`) in the document. */
  resolve(ref: string): unknown;
}

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const;

/** Names the generated code cannot use for a declared type (reserved words and global types it relies on). */
const RESERVED_TYPE_NAMES = new Set(
  (
    "break case catch class const continue debugger default delete do else enum export extends false finally for " +
    "function if import in instanceof new null return super switch this throw true try typeof var void while with " +
    "as implements interface let package private protected public static yield any boolean number string symbol " +
    "unknown never object undefined bigint type keyof readonly infer is asserts satisfies declare module namespace " +
    "Array ArrayBuffer Boolean DataView Date Error EvalError Function JSON Map Math Number Object Promise Proxy " +
    "RangeError ReferenceError Reflect RegExp Set String Symbol SyntaxError TypeError URIError WeakMap WeakSet " +
    "Uint8Array Int8Array Uint16Array Int16Array Uint32Array Int32Array Float32Array Float64Array BigInt " +
    "Record Partial Required Readonly Pick Omit Exclude Extract NonNullable ReturnType Parameters Awaited " +
    "Iterable Iterator PromiseLike ArrayLike PropertyKey HttpError Moss"
  ).split(" "),
);

/** Member names a service cannot have: runtime hooks, promise/JSON protocol names, and the service's own helpers. */
export const RESERVED_MEMBER_NAMES = new Set([
  "constructor",
  "prototype",
  "then",
  "catch",
  "finally",
  "toString",
  "toJSON",
  "valueOf",
  "hasOwnProperty",
  "onInject",
  "onDestroy",
  "describe",
  "search",
  "caller",
  "callee",
  "arguments",
]);

/** Builds the operation list and the schema names of a document. `serviceName` is kept free for the service. */
export function buildApiModel(document: OpenApiDocument, serviceName: string): ApiModel {
  const resolve = (ref: string): unknown => resolvePointer(document, ref);
  const deref = <T>(value: T): T => {
    let current: unknown = value;
    for (let hops = 0; hops < 20 && isRecord(current) && typeof current.$ref === "string"; hops++) {
      current = resolve(current.$ref);
    }
    return current as T;
  };

  const schemaNames = new Map<string, string>();
  const taken = new Set<string>([serviceName]);
  const schemas =
    isRecord(document.components) && isRecord(document.components.schemas) ? document.components.schemas : {};
  for (const key of Object.keys(schemas)) {
    let name = typeName(key);
    if (RESERVED_TYPE_NAMES.has(name) || taken.has(name)) name = `${name}Schema`;
    name = unique(name, taken);
    taken.add(name);
    schemaNames.set(`#/components/schemas/${escapePointer(key)}`, name);
  }

  const operations: ApiOperation[] = [];
  const memberNames = new Set<string>();
  const globalSecurity = Array.isArray(document.security) ? (document.security as SecurityRequirement[]) : [];
  const paths = isRecord(document.paths) ? document.paths : {};
  for (const [route, rawItem] of Object.entries(paths)) {
    const item = deref(rawItem);
    if (!isRecord(item)) continue;
    const shared = Array.isArray(item.parameters) ? item.parameters : [];
    for (const method of METHODS) {
      const operation = item[method];
      if (!isRecord(operation)) continue;
      const parameters = collectParameters(
        [...shared, ...(Array.isArray(operation.parameters) ? operation.parameters : [])],
        deref,
      );
      const body = requestBodyOf(deref(operation.requestBody), parameters, deref);
      const operationId = typeof operation.operationId === "string" ? operation.operationId : undefined;
      let name = operationId ? memberName(operationId) : fallbackName(method, route);
      if (RESERVED_MEMBER_NAMES.has(name)) name = `${name}Operation`;
      name = unique(name, memberNames);
      memberNames.add(name);
      const entry: ApiOperation = {
        name,
        method: method.toUpperCase(),
        path: route,
        tags: Array.isArray(operation.tags) ? operation.tags.map(String) : [],
        deprecated: operation.deprecated === true,
        parameters,
        security: Array.isArray(operation.security)
          ? (operation.security as SecurityRequirement[])
          : globalSecurity,
      };
      if (operationId) entry.operationId = operationId;
      if (typeof operation.summary === "string") entry.summary = operation.summary;
      if (typeof operation.description === "string") entry.description = operation.description;
      if (body) entry.body = body;
      const response = successResponse(operation.responses, deref);
      if (response) entry.response = response;
      operations.push(entry);
    }
  }
  return { document, operations, schemaNames, resolve };
}

function collectParameters(raw: unknown[], deref: <T>(value: T) => T): ApiParameter[] {
  const byWire = new Map<string, Record<string, unknown>>();
  for (const item of raw) {
    const parameter = deref(item);
    if (!isRecord(parameter) || typeof parameter.name !== "string") continue;
    if (!["path", "query", "header", "cookie"].includes(parameter.in as string)) continue;
    byWire.set(`${parameter.in}:${parameter.name.toLowerCase()}`, parameter);
  }
  const keys = new Set<string>(["body"]);
  const result: ApiParameter[] = [];
  for (const parameter of byWire.values()) {
    const location = parameter.in as ParameterLocation;
    const name = parameter.name as string;
    let key = keys.has(name) ? `${location}${capitalize(memberName(name))}` : name;
    key = unique(key, keys);
    keys.add(key);
    const schema = parameter.schema ?? firstContentSchema(parameter.content);
    const entry: ApiParameter = {
      name,
      key,
      in: location,
      required: location === "path" || parameter.required === true,
      deprecated: parameter.deprecated === true,
      explode: parameter.explode !== false,
    };
    if (schema !== undefined) entry.schema = schema as Schema;
    if (typeof parameter.description === "string") entry.description = parameter.description;
    result.push(entry);
  }
  return result;
}

const BODY_PREFERENCE = [
  /^application\/(?:[\w.+-]+\+)?json$/,
  /^application\/x-www-form-urlencoded$/,
  /^multipart\/form-data$/,
  /^text\//,
  /^application\/octet-stream$/,
];

function requestBodyOf(
  body: unknown,
  parameters: ApiParameter[],
  deref: <T>(value: T) => T,
): ApiRequestBody | undefined {
  if (!isRecord(body) || !isRecord(body.content)) return undefined;
  const mediaType = preferredMediaType(Object.keys(body.content));
  if (!mediaType) return undefined;
  const media = deref(body.content[mediaType]);
  const key = parameters.some((parameter) => parameter.key === "body") ? "requestBody" : "body";
  const result: ApiRequestBody = { key, required: body.required === true, mediaType };
  if (isRecord(media) && media.schema !== undefined) result.schema = media.schema as Schema;
  if (typeof body.description === "string") result.description = body.description;
  return result;
}

function successResponse(responses: unknown, deref: <T>(value: T) => T): ApiResponse | undefined {
  if (!isRecord(responses)) return undefined;
  const statuses = Object.keys(responses)
    .filter((status) => /^2(?:\d\d|XX)$/i.test(status))
    .sort();
  const status = statuses[0] ?? (responses.default !== undefined ? "default" : undefined);
  if (!status) return undefined;
  const response = deref(responses[status]);
  if (!isRecord(response)) return { status };
  const result: ApiResponse = { status };
  if (typeof response.description === "string") result.description = response.description;
  if (isRecord(response.content)) {
    const mediaType = preferredMediaType(Object.keys(response.content)) ?? Object.keys(response.content)[0];
    if (mediaType) {
      result.mediaType = mediaType;
      const media = deref(response.content[mediaType]);
      if (isRecord(media) && media.schema !== undefined) result.schema = media.schema as Schema;
    }
  }
  return result;
}

function preferredMediaType(types: string[]): string | undefined {
  for (const pattern of BODY_PREFERENCE) {
    const found = types.find((type) => pattern.test(type.split(";")[0]!.trim().toLowerCase()));
    if (found) return found;
  }
  return types.find((type) => type === "*/*") ?? types[0];
}

function firstContentSchema(content: unknown): unknown {
  if (!isRecord(content)) return undefined;
  const first = Object.values(content)[0];
  return isRecord(first) ? first.schema : undefined;
}

/** Resolves `#/a/b` in `document`; undefined when it points nowhere. */
export function resolvePointer(document: unknown, ref: string): unknown {
  if (!ref.startsWith("#")) return undefined;
  let current: unknown = document;
  for (const segment of ref.slice(1).split("/").slice(1)) {
    const key = decodeURIComponent(segment).replace(/~1/g, "/").replace(/~0/g, "~");
    if (!isRecord(current) && !Array.isArray(current)) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

function escapePointer(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** A type name from a schema key: kept when it is an identifier, else PascalCase of its words. */
export function typeName(key: string): string {
  if (/^[A-Za-z_$][\w$]*$/.test(key)) return key;
  const words = key.split(/[^A-Za-z0-9]+/).filter(Boolean);
  const name = words.map(capitalize).join("");
  return /^[A-Za-z]/.test(name) ? name : `T${name}`;
}

/** A method name from an operationId: kept when it is an identifier (leading `_` dropped), else camelCase. */
export function memberName(text: string): string {
  const trimmed = text.replace(/^[_$]+/, "");
  if (/^[A-Za-z][\w$]*$/.test(trimmed)) return trimmed;
  const words = text.split(/[^A-Za-z0-9]+/).filter(Boolean);
  if (words.length === 0) return "operation";
  const name =
    words[0]!.charAt(0).toLowerCase() + words[0]!.slice(1) + words.slice(1).map(capitalize).join("");
  return /^[A-Za-z]/.test(name) ? name : `op${capitalize(name)}`;
}

/** `get /pets/{petId}/photos` → `getPetsByPetIdPhotos`. */
function fallbackName(method: string, route: string): string {
  const parts = route
    .split("/")
    .filter(Boolean)
    .map((segment) => {
      const parameter = /^\{(.+)\}$/.exec(segment);
      return parameter ? `By${capitalize(memberName(parameter[1]!))}` : capitalize(memberName(segment));
    });
  return `${method}${parts.join("")}` || method;
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function unique(name: string, taken: ReadonlySet<string>): string {
  if (!taken.has(name)) return name;
  for (let index = 2; ; index++) if (!taken.has(`${name}${index}`)) return `${name}${index}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
