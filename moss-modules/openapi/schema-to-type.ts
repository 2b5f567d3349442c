/**
 * JSON Schema (the OpenAPI 3.0/3.1 dialect and MCP's draft 2020-12 tool schemas) to TypeScript type text.
 * Named schemas stay names (a `$ref` becomes the type it points to); everything else is written inline.
 */

/** A JSON Schema node as found in documents: loosely typed on purpose, every field is checked before use. */
export type Schema = boolean | { [key: string]: unknown };

/** What the converter needs from its caller. */
export interface TypeWriterOptions {
  /** The TypeScript name a `$ref` stands for, or undefined to inline the schema it resolves to. */
  refName(ref: string): string | undefined;
  /** The schema a `$ref` points to (for refs without a name); undefined when it cannot be resolved. */
  resolve(ref: string): Schema | undefined;
  /** How binary strings (`format: binary`) are typed. Default `Uint8Array`. */
  binaryType?: string;
}

/** Deepest inline nesting written out; deeper schemas become `unknown` (named refs do not count). */
const MAX_INLINE_DEPTH = 12;
/** Longest enum written as a literal union; longer ones are typed by their base type. */
const MAX_ENUM_LITERALS = 60;

/** Most schema nodes one type may visit: layered `$ref`s expand exponentially, and a declaration must stay bounded. */
export const MAX_TYPE_NODES = 10_000;

/** A schema whose type would expand past {@link MAX_TYPE_NODES}; `refs` is the chain of `$ref`s being expanded. */
export class SchemaTooLargeError extends Error {
  override name = "SchemaTooLargeError";
  readonly refs: readonly string[];

  constructor(refs: readonly string[]) {
    super(
      `the schema expands to more than ${MAX_TYPE_NODES} nodes${refs.length > 0 ? ` (through $ref ${refs.join(" → ")})` : ""}: its $refs nest too deeply to write as one type`,
    );
    this.refs = refs;
  }
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** Turns a schema into TypeScript type text; `indent` is the indentation of the line the type starts on. */
export function schemaToType(schema: Schema | undefined, options: TypeWriterOptions, indent = ""): string {
  return new TypeWriter(options).type(schema, indent, 0, new Set());
}

/** A property key as written in a type literal: bare when it is an identifier, else a string literal. */
export function propertyKey(name: string): string {
  return IDENTIFIER.test(name) ? name : JSON.stringify(name);
}

/** Text made safe to place inside a `/** … *\/` comment. */
export function commentSafe(text: string): string {
  return text.replace(/\*\//g, "*\\/").replace(/\r\n?/g, "\n");
}

/** A JSDoc block from lines (empty lines between paragraphs kept), indented; "" when there is nothing to say. */
export function jsDoc(lines: readonly string[], indent: string): string {
  const body = trimBlank(
    lines.flatMap((line) => commentSafe(line).split("\n")).map((line) => line.trimEnd()),
  );
  if (body.length === 0) return "";
  if (body.length === 1) return `${indent}/** ${body[0]} */\n`;
  return `${indent}/**\n${body.map((line) => (line ? `${indent} * ${line}` : `${indent} *`)).join("\n")}\n${indent} */\n`;
}

function trimBlank(lines: string[]): string[] {
  const result: string[] = [];
  for (const line of lines) {
    if (line === "" && (result.length === 0 || result[result.length - 1] === "")) continue;
    result.push(line);
  }
  while (result.length > 0 && result[result.length - 1] === "") result.pop();
  return result;
}

/** Lines of documentation for one schema: description, then default/example/enum/pattern/format facts. */
export function schemaDocLines(schema: Schema | undefined, extra: { description?: unknown } = {}): string[] {
  const node = isObject(schema) ? schema : {};
  const lines: string[] = [];
  const description = textOf(extra.description) ?? textOf(node.description) ?? textOf(node.title);
  if (description) lines.push(description);
  const facts: string[] = [];
  if (typeof node.format === "string" && node.format !== "binary") facts.push(`Format: ${node.format}.`);
  if (typeof node.pattern === "string") facts.push(`Pattern: \`${node.pattern}\`.`);
  if (typeof node.minimum === "number") facts.push(`Minimum: ${node.minimum}.`);
  if (typeof node.maximum === "number") facts.push(`Maximum: ${node.maximum}.`);
  if (typeof node.minLength === "number") facts.push(`Min length: ${node.minLength}.`);
  if (typeof node.maxLength === "number") facts.push(`Max length: ${node.maxLength}.`);
  if (Array.isArray(node.enum) && node.enum.length > MAX_ENUM_LITERALS)
    facts.push(`One of: ${node.enum.map(literalText).join(", ")}.`);
  if (node.default !== undefined) facts.push(`Default: ${literalText(node.default)}.`);
  const example = node.example ?? (Array.isArray(node.examples) ? node.examples[0] : undefined);
  if (example !== undefined) facts.push(`Example: ${literalText(example)}.`);
  if (node.deprecated === true) facts.push("@deprecated");
  if (facts.length > 0) {
    if (lines.length > 0) lines.push("");
    lines.push(...facts);
  }
  return lines;
}

function literalText(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

function textOf(value: unknown): string | undefined {
  return typeof value === "string" && value.trim() ? value.trim() : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

class TypeWriter {
  readonly #options: TypeWriterOptions;
  #nodes = 0;

  constructor(options: TypeWriterOptions) {
    this.#options = options;
  }

  type(schema: Schema | undefined, indent: string, depth: number, resolving: Set<string>): string {
    if (schema === undefined || schema === true) return "unknown";
    if (schema === false) return "never";
    if (!isObject(schema)) return "unknown";
    if (depth > MAX_INLINE_DEPTH) return "unknown";
    if (++this.#nodes > MAX_TYPE_NODES) throw new SchemaTooLargeError([...resolving].slice(0, 8));
    const base = this.#bare(schema, indent, depth, resolving);
    return schema.nullable === true && base !== "unknown" && base !== "null" ? union([base, "null"]) : base;
  }

  #bare(schema: Record<string, unknown>, indent: string, depth: number, resolving: Set<string>): string {
    if (typeof schema.$ref === "string") return this.#reference(schema.$ref, indent, depth, resolving);
    if ("const" in schema) return literal(schema.const) ?? "unknown";
    if (Array.isArray(schema.enum) && schema.enum.length > 0 && schema.enum.length <= MAX_ENUM_LITERALS) {
      const literals = schema.enum.map(literal);
      if (literals.every((text) => text !== undefined)) return union(literals as string[]);
    }
    const composed: string[] = [];
    if (Array.isArray(schema.allOf) && schema.allOf.length > 0) {
      const parts = schema.allOf.map((part) => this.type(part as Schema, indent, depth + 1, resolving));
      composed.push(intersection(parts));
    }
    for (const key of ["oneOf", "anyOf"] as const) {
      const options = schema[key];
      if (Array.isArray(options) && options.length > 0) {
        composed.push(union(options.map((part) => this.type(part as Schema, indent, depth + 1, resolving))));
      }
    }
    const own = this.#ownType(schema, indent, depth, resolving);
    if (composed.length === 0) return own ?? "unknown";
    if (own !== undefined && own !== "unknown") composed.push(own);
    return intersection(composed);
  }

  #reference(ref: string, indent: string, depth: number, resolving: Set<string>): string {
    const name = this.#options.refName(ref);
    if (name) return name;
    if (resolving.has(ref)) return "unknown";
    const target = this.#options.resolve(ref);
    if (target === undefined) return "unknown";
    resolving.add(ref);
    try {
      return this.type(target, indent, depth + 1, resolving);
    } finally {
      resolving.delete(ref);
    }
  }

  /** The type from `type` (and properties/items), or undefined when the schema says nothing about its own shape. */
  #ownType(
    schema: Record<string, unknown>,
    indent: string,
    depth: number,
    resolving: Set<string>,
  ): string | undefined {
    const declared = Array.isArray(schema.type)
      ? schema.type
      : schema.type === undefined
        ? []
        : [schema.type];
    const types = declared.filter((type): type is string => typeof type === "string");
    if (types.length === 0) {
      if (isObject(schema.properties) || schema.additionalProperties !== undefined)
        return this.#object(schema, indent, depth, resolving);
      if (schema.items !== undefined) return this.#array(schema, indent, depth, resolving);
      return undefined;
    }
    return union(
      types.map((type) => {
        switch (type) {
          case "string":
            return schema.format === "binary" ? (this.#options.binaryType ?? "Uint8Array") : "string";
          case "integer":
          case "number":
            return "number";
          case "boolean":
            return "boolean";
          case "null":
            return "null";
          case "array":
            return this.#array(schema, indent, depth, resolving);
          case "object":
            return this.#object(schema, indent, depth, resolving);
          default:
            return "unknown";
        }
      }),
    );
  }

  #array(schema: Record<string, unknown>, indent: string, depth: number, resolving: Set<string>): string {
    if (Array.isArray(schema.prefixItems)) {
      const items = schema.prefixItems.map((item) => this.type(item as Schema, indent, depth + 1, resolving));
      return `[${items.join(", ")}]`;
    }
    const item = this.type(schema.items as Schema | undefined, indent, depth + 1, resolving);
    return /^[\w$.]+$/.test(item) ? `${item}[]` : `Array<${item}>`;
  }

  #object(schema: Record<string, unknown>, indent: string, depth: number, resolving: Set<string>): string {
    const properties = isObject(schema.properties) ? schema.properties : {};
    const required = new Set(Array.isArray(schema.required) ? schema.required.map(String) : []);
    const inner = `${indent}  `;
    const members: string[] = [];
    for (const [name, property] of Object.entries(properties)) {
      const propertySchema = property as Schema;
      const doc = jsDoc(schemaDocLines(propertySchema), inner);
      const readOnly = isObject(propertySchema) && propertySchema.readOnly === true ? "readonly " : "";
      const optional = required.has(name) ? "" : "?";
      const type = this.type(propertySchema, inner, depth + 1, resolving);
      members.push(`${doc}${inner}${readOnly}${propertyKey(name)}${optional}: ${type};\n`);
    }
    const additional = schema.additionalProperties;
    if (additional !== undefined && additional !== false) {
      const type =
        additional === true ? "unknown" : this.type(additional as Schema, inner, depth + 1, resolving);
      const valueType = members.length > 0 && type !== "unknown" ? "unknown" : type;
      members.push(`${inner}[key: string]: ${valueType};\n`);
    }
    if (members.length === 0) {
      return additional === false ? "Record<string, never>" : "Record<string, unknown>";
    }
    return `{\n${members.join("")}${indent}}`;
  }
}

function literal(value: unknown): string | undefined {
  if (value === null) return "null";
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean")
    return JSON.stringify(value);
  return undefined;
}

function union(types: string[]): string {
  const unique = [...new Set(types)];
  if (unique.includes("unknown")) return "unknown";
  if (unique.length === 1) return unique[0]!;
  return unique.map((type) => (hasTopLevel(type, "&") ? `(${type})` : type)).join(" | ");
}

function intersection(types: string[]): string {
  const unique = [...new Set(types)].filter((type) => type !== "unknown");
  if (unique.length === 0) return "unknown";
  if (unique.length === 1) return unique[0]!;
  return unique.map((type) => (hasTopLevel(type, "|") ? `(${type})` : type)).join(" & ");
}

/** Whether `operator` occurs in `type` outside brackets and string literals. */
function hasTopLevel(type: string, operator: "|" | "&"): boolean {
  let depth = 0;
  let quote = "";
  for (let index = 0; index < type.length; index++) {
    const character = type[index]!;
    if (!quote && character === "/" && type[index + 1] === "*") {
      const end = type.indexOf("*/", index + 2);
      index = end === -1 ? type.length : end + 1;
    } else if (quote) {
      if (character === "\\") index++;
      else if (character === quote) quote = "";
    } else if (character === '"' || character === "'") quote = character;
    else if ("{[(<".includes(character)) depth++;
    else if ("}])>".includes(character)) depth--;
    else if (character === operator && depth === 0) return true;
  }
  return false;
}
