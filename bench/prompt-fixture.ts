// Generates a context module importing `count` declarations, and the same API as OpenAI function-calling tools.
//
// Every fifth declaration is one of: an interface (Item), a type alias (Filter), a function with JSDoc
// (findItems), a class with methods and private members (Store, a service field of Moss) and a const. Both
// forms are built from the same unit description, so they carry the same names, docs and parameter types.

/** A JSON schema, as sent in a tool's `parameters`. */
type JsonSchema = Record<string, unknown>;

/** One tool in the OpenAI function-calling format (`tools` of a chat-completions request). */
export interface FunctionTool {
  type: "function";
  function: { name: string; description: string; parameters: JsonSchema; strict?: boolean };
}

/** The generated files and the equivalent tool list. */
export interface PromptFixture {
  declarations: number;
  apiSource: string;
  contextSource: string;
  tools: FunctionTool[];
}

const DOMAINS = [
  "book",
  "order",
  "invoice",
  "ticket",
  "sensor",
  "route",
  "patient",
  "parcel",
  "song",
  "lease",
];

interface Unit {
  index: number;
  domain: string;
  item: string;
  filter: string;
  find: string;
  store: string;
  field: string;
  limit: string;
}

function unit(index: number): Unit {
  const domain = DOMAINS[index % DOMAINS.length]!;
  const title = domain[0]!.toUpperCase() + domain.slice(1);
  return {
    index,
    domain,
    item: `${title}${index}`,
    filter: `${title}Filter${index}`,
    find: `find${title}s${index}`,
    store: `${title}Store${index}`,
    field: `${domain}s${index}`,
    limit: `${domain.toUpperCase()}_PAGE_SIZE_${index}`,
  };
}

function apiDeclarations(u: Unit): string[] {
  return [
    `/** A ${u.domain} kept in ${u.store}. */`,
    `export interface ${u.item} {`,
    "  /** Unique id. */",
    "  id: number;",
    `  /** Human-readable label of the ${u.domain}. */`,
    "  label: string;",
    "  /** Free tags, used by filters. */",
    "  tags: string[];",
    "  /** Price in cents, when it is for sale. */",
    "  priceCents?: number;",
    "}",
    "",
    `/** Selects ${u.domain}s: \`field\` compared with \`value\` by \`op\` (default "eq"). */`,
    `export type ${u.filter} = { field: "id" | "label" | "priceCents"; value: string | number; op?: "eq" | "lt" | "gt" };`,
    "",
    "/**",
    ` * Finds ${u.domain}s matching every filter, newest first.`,
    " * @param filters conditions that must all hold",
    ` * @param limit at most this many results (default ${u.limit})`,
    " */",
    `export async function ${u.find}(filters: ${u.filter}[], limit?: number): Promise<${u.item}[]> {`,
    "  return filters.length >= 0 && limit !== 0 ? [] : [];",
    "}",
    "",
    `/** Keeps ${u.domain}s in memory, by id. */`,
    `export class ${u.store} {`,
    `  private cache = new Map<number, ${u.item}>();`,
    "  #writes = 0;",
    "",
    `  /** The ${u.domain} with this id, or undefined. */`,
    `  get(id: number): ${u.item} | undefined {`,
    "    return this.cache.get(id);",
    "  }",
    "",
    `  /** Adds or replaces a ${u.domain}; resolves once it is stored. */`,
    `  async put(item: ${u.item}): Promise<void> {`,
    "    this.#writes++;",
    "    this.cache.set(item.id, item);",
    "  }",
    "",
    `  /** Removes the ${u.domain} with this id; returns whether it existed. */`,
    "  remove(id: number): boolean {",
    "    return this.cache.delete(id);",
    "  }",
    "",
    `  /** ${u.domain[0]!.toUpperCase()}${u.domain.slice(1)}s carrying this tag, at most \`limit\`. */`,
    `  byTag(tag: string, limit?: number): ${u.item}[] {`,
    "    return [...this.cache.values()].filter((item) => item.tags.includes(tag)).slice(0, limit);",
    "  }",
    "",
    `  /** Number of ${u.domain}s stored. */`,
    "  count(): number {",
    "    return this.cache.size + this.#writes * 0;",
    "  }",
    "",
    "  private evict(): void {",
    "    this.cache.clear();",
    "  }",
    "}",
    "",
    `/** Default page size of ${u.find}. */`,
    `export const ${u.limit} = ${20 + (u.index % 5) * 10};`,
    "",
  ];
}

function itemSchema(u: Unit): JsonSchema {
  return {
    type: "object",
    description: `A ${u.domain} kept in ${u.store}.`,
    properties: {
      id: { type: "number", description: "Unique id." },
      label: { type: "string", description: `Human-readable label of the ${u.domain}.` },
      tags: { type: "array", items: { type: "string" }, description: "Free tags, used by filters." },
      priceCents: { type: "number", description: "Price in cents, when it is for sale." },
    },
    required: ["id", "label", "tags"],
    additionalProperties: false,
  };
}

function filterSchema(u: Unit): JsonSchema {
  return {
    type: "object",
    description: `Selects ${u.domain}s: \`field\` compared with \`value\` by \`op\` (default "eq").`,
    properties: {
      field: { type: "string", enum: ["id", "label", "priceCents"] },
      value: { type: ["string", "number"] },
      op: { type: "string", enum: ["eq", "lt", "gt"] },
    },
    required: ["field", "value"],
    additionalProperties: false,
  };
}

function tool(name: string, description: string, properties: JsonSchema, required: string[]): FunctionTool {
  return {
    type: "function",
    function: {
      name,
      description,
      parameters: { type: "object", properties, required, additionalProperties: false },
    },
  };
}

/** The tools a code-mode peer would send for one unit: the function and each public method of the service. */
function unitTools(u: Unit): FunctionTool[] {
  const id = { type: "number", description: `Id of the ${u.domain}.` };
  return [
    tool(
      u.find,
      `Finds ${u.domain}s matching every filter, newest first.`,
      {
        filters: { type: "array", items: filterSchema(u), description: "conditions that must all hold" },
        limit: {
          type: "number",
          description: `at most this many results (default ${20 + (u.index % 5) * 10})`,
        },
      },
      ["filters"],
    ),
    tool(`${u.field}_get`, `The ${u.domain} with this id, or undefined.`, { id }, ["id"]),
    tool(
      `${u.field}_put`,
      `Adds or replaces a ${u.domain}; resolves once it is stored.`,
      { item: itemSchema(u) },
      ["item"],
    ),
    tool(`${u.field}_remove`, `Removes the ${u.domain} with this id; returns whether it existed.`, { id }, [
      "id",
    ]),
    tool(
      `${u.field}_byTag`,
      `${u.domain[0]!.toUpperCase()}${u.domain.slice(1)}s carrying this tag, at most \`limit\`.`,
      { tag: { type: "string" }, limit: { type: "number" } },
      ["tag"],
    ),
    tool(`${u.field}_count`, `Number of ${u.domain}s stored.`, {}, []),
  ];
}

/** Builds the api module, the context module importing all of it, and the equivalent tools. */
export function promptFixture(declarations: number): PromptFixture {
  const units = Array.from({ length: Math.ceil(declarations / 5) }, (_, index) => unit(index));
  const apiSource = [
    "// Generated by bench/prompt-fixture.ts: a module exporting a mix of declarations.",
    "",
    ...units.flatMap(apiDeclarations),
  ].join("\n");
  const importNames = units.flatMap((u) => [`type ${u.item}`, `type ${u.filter}`, u.find, u.store, u.limit]);
  const contextSource = [
    'import { Moss as Parent } from "moss-ts";',
    `import { ${importNames.join(", ")} } from "./api.ts";`,
    "",
    "// Finders, shapes and page sizes of every store, for your code.",
    `export type { ${units.flatMap((u) => [u.item, u.filter]).join(", ")} };`,
    `export { ${units.flatMap((u) => [u.find, u.limit]).join(", ")} };`,
    "",
    "/** You keep the stores below up to date. Data fields of `moss` are kept between your turns. */",
    "export class Moss extends Parent {",
    ...units.flatMap((u) => [`  /** The ${u.domain}s of store ${u.index}. */`, `  ${u.field}!: ${u.store};`]),
    "  /** Notes you keep between turns. */",
    "  notes: string[] = [];",
    "}",
    "",
    "// <moss-hide>",
    'import type { MossCompiler } from "moss-ts";',
    "",
    "export function __moss_compile__(compiler: MossCompiler): void {",
    ...units.map((u) => `  compiler.bind(${u.store}, new ${u.store}());`),
    "}",
    "// </moss-hide>",
    "",
  ].join("\n");
  return { declarations: units.length * 5, apiSource, contextSource, tools: units.flatMap(unitTools) };
}
