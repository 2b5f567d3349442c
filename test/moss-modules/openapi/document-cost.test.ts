import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";
import { countTokens } from "../../../engine/agent/index.ts";
import { MossCompiler } from "../../../engine/compiler/moss-compiler.ts";
import { bindOpenApi, loadOpenApi } from "../../../moss-modules/openapi/index.ts";
import { MAX_EXPANDED_NODES, measureRefExpansion } from "../../../moss-modules/openapi/ref-expansion.ts";

// Issue 24 §1: GitHub's OpenAPI document was refused with validation on ("expands to more than 1000000 nodes once
// its $refs are followed"). Validation now reads a document as a graph (a schema reached through many $refs is read
// once) and is bounded by that; $refs layered to grow exponentially are still refused.
const require = createRequire(import.meta.url);
const GITHUB = require.resolve("@octokit/openapi/generated/api.github.com.json");

/** A document whose `l<depth>` schema refers `fan` times to `l<depth-1>`, down to a string. */
function layered(depth: number, fan: number, uses = 1): Record<string, unknown> {
  const schemas: Record<string, unknown> = { l0: { type: "string" } };
  for (let layer = 1; layer <= depth; layer++) {
    const properties: Record<string, unknown> = {};
    for (let index = 0; index < fan; index++)
      properties[`p${index}`] = { $ref: `#/components/schemas/l${layer - 1}` };
    schemas[`l${layer}`] = { type: "object", properties };
  }
  const paths: Record<string, unknown> = {};
  for (let use = 0; use < uses; use++) {
    paths[`/things${use}`] = {
      get: {
        operationId: `listThings${use}`,
        responses: {
          "200": {
            description: "ok",
            content: { "application/json": { schema: { $ref: `#/components/schemas/l${depth}` } } },
          },
        },
      },
    };
  }
  return {
    openapi: "3.0.3",
    info: { title: "Layered", version: "1" },
    components: { schemas },
    paths,
  };
}

describe("what validating an OpenAPI document costs is measured as a graph", () => {
  test("a schema shared by many operations is counted once: it loads with validation on", async () => {
    // 400 operations share a schema that expands to ~16,000 nodes: ~6.5 million once every $ref is followed as a
    // tree (the old bound refused it), a few hundred nodes as written.
    const document = layered(12, 2, 400);
    expect(measureRefExpansion(document, Number.MAX_SAFE_INTEGER).nodes).toBeGreaterThan(1_000_000);
    const loaded = await loadOpenApi(document);
    expect(Object.keys(loaded.document.paths as object)).toHaveLength(400);
  });

  test("a doubling $ref chain is refused before anything follows it, naming the $ref", async () => {
    const started = performance.now();
    await expect(loadOpenApi(layered(40, 2))).rejects.toMatchObject({
      code: "schema-too-large",
      message: expect.stringMatching(
        new RegExp(
          `\\$ref #/components/schemas/l40 - the document expands to more than ${MAX_EXPANDED_NODES} nodes once its \\$refs are followed`,
        ),
      ),
    });
    // Refused by counting, not by a validator that ran for minutes (a generous bound: the machine is shared).
    expect(performance.now() - started).toBeLessThan(30_000);
  });

  test("a document that is wrong is still refused, located in the document as written", async () => {
    const document = layered(3, 2);
    (document.components as { schemas: Record<string, unknown> }).schemas.l1 = {
      type: "object",
      properties: "not a mapping",
    };
    await expect(loadOpenApi(document)).rejects.toThrow(/components\/schemas\/l1|properties/);
    const dangling = layered(2, 2);
    (dangling.components as { schemas: Record<string, unknown> }).schemas.l1 = {
      $ref: "#/components/schemas/missing",
    };
    await expect(loadOpenApi(dangling)).rejects.toThrow(/missing/);
  });
});

test("GitHub's REST document loads with validation on and still costs the model under 2k prompt tokens", async () => {
  const folder = fileURLToPath(
    new URL(`../../fixtures/.tmp/github-validated-${process.pid}/`, import.meta.url),
  );
  mkdirSync(folder, { recursive: true });
  try {
    const compiler = new MossCompiler({ sandbox: "in-process" });
    const binding = await bindOpenApi(compiler, "GitHub", GITHUB, {
      typesFile: path.join(folder, "github.api.ts"),
    });
    expect(binding.model.operations.length).toBeGreaterThan(1000);
    expect(binding.declaration.searchable).toBe(true);
    const modulePath = path.join(folder, "context.ts");
    writeFileSync(
      modulePath,
      'import { Moss as Parent } from "moss-ts";\nimport type { GitHub } from "./github.api.ts";\nexport class Moss extends Parent { github!: GitHub; }\n',
    );
    const runtime = await compiler.compile(modulePath);
    try {
      const prompt = await runtime.prompter().dumpModulePrompt();
      expect(prompt).toMatch(/This API has \d+ operations/);
      expect(countTokens(prompt)).toBeLessThanOrEqual(2000);
    } finally {
      await runtime.close();
    }
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}, 180_000);
