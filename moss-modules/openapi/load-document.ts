import { readdir, readFile, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import SwaggerParser from "@apidevtools/swagger-parser";
import { LineCounter, parseDocument, type Node as YamlNode } from "yaml";
import { MossError } from "../../engine/errors.ts";
import { OpenApiLoadError } from "./errors.ts";
import { type FlowDefinition, parseFlow } from "./flows.ts";
import { type PluginManifest, parsePluginManifest } from "./plugin-manifest.ts";
import {
  countDocumentNodes,
  MAX_DOCUMENT_NODES,
  MAX_EXPANDED_NODES,
  measureRefExpansion,
} from "./ref-expansion.ts";

/** An OpenAPI 3.0/3.1 document as parsed: plain JSON data. */
export type OpenApiDocument = { [key: string]: unknown };

/** What `loadOpenApi` read: the document and, for a plugin folder, its manifest and flows. */
export interface LoadedApi {
  document: OpenApiDocument;
  /** The document's file as the caller named it (for messages), when it came from a file. */
  file?: string;
  /** The plugin folder, when the source was one. */
  folder?: string;
  /** `plugin.json` of a plugin folder. */
  plugin?: PluginManifest;
  /** `flows/*.yaml` of a plugin folder, in file-name order. */
  flows: FlowDefinition[];
}

/** Options of `loadOpenApi`. */
export interface LoadOpenApiOptions {
  /** Validate against the OpenAPI schema (default true). Turn off for very large trusted documents. */
  validate?: boolean;
}

const DOCUMENT_NAMES = ["openapi.yaml", "openapi.yml", "openapi.json"];
/** Most validation problems listed in one error. */
const MAX_PROBLEMS = 6;

/**
 * Reads a plugin folder (`plugin.json` + `openapi.yaml` + optional `flows/`), an OpenAPI file (YAML or JSON), or
 * a document object; validates it and returns it with external `$ref`s bundled into the document.
 */
export async function loadOpenApi(
  source: string | OpenApiDocument,
  options: LoadOpenApiOptions = {},
): Promise<LoadedApi> {
  if (typeof source !== "string") {
    const document = structuredClone(source);
    await validateDocument(document, undefined, undefined, options);
    return { document, flows: [] };
  }
  const info = await stat(source).catch((error: NodeJS.ErrnoException) => {
    throw new OpenApiLoadError(
      error.code === "ENOENT"
        ? `${source}: no such plugin folder or OpenAPI file`
        : `${source}: ${error.message}`,
    );
  });
  if (!info.isDirectory()) return { ...(await loadDocumentFile(source, options)), flows: [] };

  const manifestFile = path.join(source, "plugin.json");
  const plugin = await readText(manifestFile, true).then((text) =>
    text === undefined ? undefined : parsePluginManifest(text, manifestFile, path.basename(source)),
  );
  const entries = await readdir(source);
  const documentName = DOCUMENT_NAMES.find((name) => entries.includes(name));
  if (!documentName) {
    throw new OpenApiLoadError(
      `${source}: a plugin folder needs ${DOCUMENT_NAMES.join(" or ")} (found none)`,
    );
  }
  const loaded = await loadDocumentFile(path.join(source, documentName), options);
  const flowsFolder = path.join(source, "flows");
  const flowFiles = (await readdir(flowsFolder).catch(() => [] as string[]))
    .filter((name) => /\.ya?ml$/.test(name))
    .sort();
  const flows: FlowDefinition[] = [];
  for (const name of flowFiles) {
    const file = path.join(flowsFolder, name);
    flows.push(parseFlow(parseYaml((await readText(file, false))!, file), file));
  }
  const seen = new Set<string>();
  for (const flow of flows) {
    if (seen.has(flow.name))
      throw new OpenApiLoadError(`${flow.file}: flow name "${flow.name}" is used twice`);
    seen.add(flow.name);
  }
  return { ...loaded, folder: source, ...(plugin ? { plugin } : {}), flows };
}

async function loadDocumentFile(
  file: string,
  options: LoadOpenApiOptions,
): Promise<{ document: OpenApiDocument; file: string }> {
  const text = (await readText(file, false))!;
  // JSON.parse is ~50x faster than a YAML document with positions; positions are built only to report an error.
  let view: { document: ReturnType<typeof parseDocument>; lineCounter: LineCounter } | undefined;
  const yamlView = () => {
    if (!view) {
      const lineCounter = new LineCounter();
      view = {
        document: parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true }),
        lineCounter,
      };
    }
    return view;
  };
  let parsed: unknown;
  if (/^\s*[{[]/.test(text)) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
  }
  if (parsed === undefined) {
    const { document: yamlDocument, lineCounter } = yamlView();
    const first = yamlDocument.errors[0];
    if (first) {
      const position = lineCounter.linePos(first.pos[0]);
      throw new OpenApiLoadError(`${file}:${position.line}:${position.col} - ${firstLine(first.message)}`);
    }
    parsed = yamlDocument.toJS({ maxAliasCount: 1000 }) as unknown;
  }
  if (!isRecord(parsed)) throw new OpenApiLoadError(`${file}:1:1 - an OpenAPI document must be a mapping`);
  let document = parsed;
  if (hasExternalRef(document)) {
    document = (await SwaggerParser.bundle(path.resolve(file)).catch((error: Error) => {
      throw new OpenApiLoadError(`${file}: ${error.message}`);
    })) as OpenApiDocument;
  }
  const locate = (pointer: string): string => {
    const { document: yamlDocument, lineCounter } = yamlView();
    const node = yamlDocument.getIn(pointerSegments(pointer), true) as YamlNode | undefined;
    const offset = node?.range?.[0];
    if (offset === undefined) return file;
    const position = lineCounter.linePos(offset);
    return `${file}:${position.line}:${position.col}`;
  };
  await validateDocument(document, file, locate, options);
  return { document, file };
}

async function validateDocument(
  document: OpenApiDocument,
  file: string | undefined,
  locate: ((pointer: string) => string) | undefined,
  options: LoadOpenApiOptions,
): Promise<void> {
  const label = file ?? "OpenAPI document";
  const version = typeof document.openapi === "string" ? document.openapi : undefined;
  if (!version || !/^3\.[01]\./.test(version)) {
    const where = locate?.("/openapi") ?? label;
    throw new OpenApiLoadError(
      `${where} - only OpenAPI 3.0 and 3.1 documents are supported (openapi: ${JSON.stringify(document.openapi ?? document.swagger ?? null)})`,
    );
  }
  if (options.validate === false) return;
  // Validation reads the document as a graph (a schema reached through many $refs is read once): its cost is the
  // document's own size, bounded here; $refs layered to grow exponentially once followed are refused too.
  if (countDocumentNodes(document) > MAX_DOCUMENT_NODES) {
    throw new MossError(
      "schema-too-large",
      `${label} - the document has more than ${MAX_DOCUMENT_NODES} nodes (validate: false skips this check for a large document you trust)`,
      { file },
    );
  }
  const expansion = measureRefExpansion(document);
  if (expansion.nodes > MAX_EXPANDED_NODES) {
    const where = expansion.largestRef
      ? `${locate?.(expansion.largestRef.slice(1)) ?? label}: $ref ${expansion.largestRef}`
      : label;
    throw new MossError(
      "schema-too-large",
      `${where} - the document expands to more than ${MAX_EXPANDED_NODES} nodes once its $refs are followed; its $refs nest too deeply (validate: false skips this check for a large document you trust)`,
      { file, ref: expansion.largestRef },
    );
  }
  try {
    // The OpenAPI schema check on the document as written ($refs are Reference objects there, their targets are
    // checked where they are defined), then every $ref resolved once. SwaggerParser.validate would check the
    // dereferenced document instead, walking a shared schema once per $ref that reaches it: exponential time for
    // layered $refs, seconds for GitHub's document.
    validateOpenApiSchema(document);
    await SwaggerParser.dereference(structuredClone(document) as never);
  } catch (error) {
    throw new OpenApiLoadError(describeValidationError(error, label, locate), { cause: error });
  }
}

/** swagger-parser's check of a document against the OpenAPI 3.0/3.1 JSON schema (ajv), without dereferencing. */
const validateOpenApiSchema = createRequire(import.meta.url)(
  "@apidevtools/swagger-parser/lib/validators/schema.js",
) as (document: unknown) => void;

function describeValidationError(
  error: unknown,
  label: string,
  locate: ((pointer: string) => string) | undefined,
): string {
  const details = (
    error as { details?: Array<{ instancePath?: string; message?: string; params?: unknown }> }
  ).details;
  if (Array.isArray(details) && details.length > 0) {
    // The deepest paths name the actual mistake; their parents repeat it as "must match one schema".
    const deepest = Math.max(...details.map((detail) => (detail.instancePath ?? "").split("/").length));
    const lines = new Set<string>();
    for (const detail of details) {
      const pointer = detail.instancePath ?? "";
      if (pointer.split("/").length < deepest) continue;
      const where = locate?.(pointer) ?? label;
      const allowed = (detail.params as { allowedValues?: unknown[] } | undefined)?.allowedValues;
      lines.add(
        `${where} - ${readablePointer(pointer)} ${detail.message ?? "is invalid"}${allowed ? ` (${allowed.join(", ")})` : ""}`,
      );
    }
    const merged = mergeAllowed([...lines]);
    return merged.slice(0, MAX_PROBLEMS).join("\n");
  }
  const parentPath = (error as { parentPath?: unknown }).parentPath;
  const message = error instanceof Error ? error.message : String(error);
  if (typeof parentPath === "string" && parentPath.startsWith("#")) {
    const pointer = parentPath.slice(1);
    return `${locate?.(pointer) ?? label} - ${readablePointer(pointer)}: ${firstLine(message)}`;
  }
  return `${label} - ${firstLine(message)}`;
}

/** Several "must be equal to one of the allowed values (x)" lines for one place become one line listing all. */
function mergeAllowed(lines: string[]): string[] {
  const merged = new Map<string, string[]>();
  const order: string[] = [];
  for (const line of lines) {
    const match = /^(.* must be equal to one of the allowed values) \((.*)\)$/.exec(line);
    const key = match ? match[1]! : line;
    if (!merged.has(key)) {
      merged.set(key, []);
      order.push(key);
    }
    if (match) merged.get(key)!.push(match[2]!);
  }
  return order.map((key) => {
    const values = merged.get(key)!;
    return values.length > 0 ? `${key} (${values.join(", ")})` : key;
  });
}

function readablePointer(pointer: string): string {
  const segments = pointerSegments(pointer);
  return segments.length === 0 ? "the document" : segments.join(".");
}

function pointerSegments(pointer: string): string[] {
  return pointer
    .split("/")
    .slice(1)
    .map((segment) => decodeURIComponent(segment.replace(/~1/g, "/").replace(/~0/g, "~")));
}

function hasExternalRef(value: unknown, depth = 0): boolean {
  if (depth > 200 || typeof value !== "object" || value === null) return false;
  if (Array.isArray(value)) return value.some((item) => hasExternalRef(item, depth + 1));
  const ref = (value as { $ref?: unknown }).$ref;
  if (typeof ref === "string" && !ref.startsWith("#")) return true;
  return Object.values(value).some((item) => hasExternalRef(item, depth + 1));
}

/** Parses YAML (or JSON) text; a syntax error is reported as `file:line:column - message`. */
export function parseYaml(text: string, file: string): unknown {
  const lineCounter = new LineCounter();
  const document = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const first = document.errors[0];
  if (first) {
    const position = lineCounter.linePos(first.pos[0]);
    throw new OpenApiLoadError(`${file}:${position.line}:${position.col} - ${firstLine(first.message)}`);
  }
  return document.toJS({ maxAliasCount: 1000 });
}

async function readText(file: string, optional: boolean): Promise<string | undefined> {
  try {
    return await readFile(file, "utf8");
  } catch (error) {
    if (optional && (error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new OpenApiLoadError(`${file}: cannot read: ${(error as Error).message}`);
  }
}

function firstLine(message: string): string {
  return message.split("\n")[0]!.trim();
}

function isRecord(value: unknown): value is OpenApiDocument {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
