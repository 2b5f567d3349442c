import { Project } from "ts-morph";
import { describe, expect, test } from "vitest";
import { MODULE_COMPILER_OPTIONS } from "../../../engine/module/module-project.ts";
import {
  buildApiModel,
  type OpenApiDocument,
  openApiDeclaration,
  type Schema,
  schemaToType,
} from "../../../moss-modules/openapi/index.ts";

const writer = { refName: (ref: string) => ref.split("/").pop(), resolve: () => undefined };
const type = (schema: Schema) => schemaToType(schema, writer);

describe("JSON Schema to TypeScript", () => {
  test.each([
    [{ type: "string", nullable: true }, "string | null"],
    [{ type: ["string", "null"] }, "string | null"],
    [{ enum: ["a", "b", 3, null] }, '"a" | "b" | 3 | null'],
    [{ const: "fixed" }, '"fixed"'],
    [{ type: "array", items: { $ref: "#/components/schemas/Pet" } }, "Pet[]"],
    [{ type: "array", items: { type: ["string", "number"] } }, "Array<string | number>"],
    [{ type: "array", prefixItems: [{ type: "string" }, { type: "integer" }] }, "[string, number]"],
    [{ oneOf: [{ $ref: "#/x/A" }, { $ref: "#/x/B" }] }, "A | B"],
    [{ allOf: [{ $ref: "#/x/A" }, { oneOf: [{ $ref: "#/x/B" }, { $ref: "#/x/C" }] }] }, "A & (B | C)"],
    [{ type: "object", additionalProperties: { type: "integer" } }, "{\n  [key: string]: number;\n}"],
    [{ type: "object" }, "Record<string, unknown>"],
    [{ type: "string", format: "binary" }, "Uint8Array"],
    [true, "unknown"],
    [false, "never"],
  ] as Array<[Schema, string]>)("%j → %s", (schema, expected) => {
    expect(type(schema)).toBe(expected);
  });

  test("property names that are not identifiers are quoted; optional and readOnly are kept", () => {
    expect(
      type({
        type: "object",
        required: ["content-type"],
        properties: { "content-type": { type: "string" }, id: { type: "integer", readOnly: true } },
      }),
    ).toBe('{\n  "content-type": string;\n  readonly id?: number;\n}');
  });

  test("a description cannot close the comment and inject code into the generated file", () => {
    const document: OpenApiDocument = {
      openapi: "3.0.0",
      info: { title: "t */ export const injected = 1; /*", version: "1" },
      paths: {
        "/a": {
          get: {
            operationId: "get-a",
            summary: "*/ declare const evil: number; /**",
            responses: {
              "200": {
                description: "ok",
                content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
              },
            },
          },
        },
      },
      components: {
        schemas: {
          Error: { type: "object", properties: { "*/x": { type: "string", description: "*/ }" } } },
          "weird name/with.parts": { type: "string" },
        },
      },
    };
    const generated = openApiDeclaration(buildApiModel(document, "Api"), { name: "Api" });
    const project = new Project({ compilerOptions: MODULE_COMPILER_OPTIONS, useInMemoryFileSystem: true });
    const file = project.createSourceFile("/api.ts", generated.text);
    expect(project.getPreEmitDiagnostics().map((diagnostic) => diagnostic.getMessageText())).toEqual([]);
    expect(file.getVariableStatements()).toEqual([]);
    expect(
      file
        .getInterfaceOrThrow("Api")
        .getMethods()
        .map((method) => method.getName()),
    ).toEqual(["getA"]);
    expect(file.getTypeAliases().map((alias) => alias.getName())).toContain("WeirdNameWithParts");
    expect(file.getInterface("ErrorSchema")).toBeDefined();
  });
});
