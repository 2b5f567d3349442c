import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect, test } from "vitest";
import { countTokens } from "../../../engine/agent/index.ts";
import { MossCompiler } from "../../../engine/compiler/moss-compiler.ts";
import { bindOpenApi, type OperationMatch, openApiService } from "../../../moss-modules/openapi/index.ts";

const require = createRequire(import.meta.url);
const GITHUB = require.resolve("@octokit/openapi/generated/api.github.com.json");

test("GitHub's full REST document loads and becomes a compact index with describe() below the search threshold", async () => {
  const binding = await openApiService("GitHub", GITHUB, {
    validate: false,
    include: ["repos/get"],
    maxIndexOperations: 5000,
  });
  expect(binding.model.operations.length).toBeGreaterThan(1000);
  expect(binding.declaration.compact).toBe(true);
  const service = binding.declaration.text.slice(
    0,
    binding.declaration.text.indexOf("/** Every operation of GitHub"),
  );
  expect(service).toContain("export interface GitHub {");
  expect(service).toMatch(
    /\/\*\* \[issues\] List repository issues \*\/\n {2}issuesListForRepo: typeof operations\.issuesListForRepo;/,
  );
  expect(service).toMatch(/ {2}reposGet\(args: \{\n[\s\S]*owner: string;/);
  const describe = (binding.service as { describe(name: string): string }).describe;
  expect(describe("issuesListForRepo")).toMatch(
    /^\/\*\*\n \* List repository issues[\s\S]*issuesListForRepo\(args: \{/,
  );
  expect(describe("FullRepository")).toMatch(/^\/\*\*[\s\S]*export interface FullRepository \{/);
}, 60_000);

test("GitHub's REST API costs the model under 2k prompt tokens: tags with counts, search() and describe()", async () => {
  const folder = fileURLToPath(new URL(`../../fixtures/.tmp/github-${process.pid}/`, import.meta.url));
  mkdirSync(folder, { recursive: true });
  try {
    const compiler = new MossCompiler({ sandbox: "in-process" });
    const binding = await bindOpenApi(compiler, "GitHub", GITHUB, {
      validate: false,
      typesFile: path.join(folder, "github.api.ts"),
    });
    expect(binding.declaration.searchable).toBe(true);
    const modulePath = path.join(folder, "context.ts");
    writeFileSync(
      modulePath,
      'import { Moss as Parent } from "moss-ts";\nimport type { GitHub } from "./github.api.ts";\nexport class Moss extends Parent { github!: GitHub; }\n',
    );
    const runtime = await compiler.compile(modulePath);
    try {
      const prompt = await runtime.prompter().dumpModulePrompt();
      expect(prompt).toContain("This API has 1223 operations");
      expect(prompt).toMatch(/issues \(\d+\)/);
      expect(prompt).not.toMatch(/\bissuesCreateComment\b/);
      expect(countTokens(prompt)).toBeLessThanOrEqual(2000);
      const search = (binding.service as { search(query: string): OperationMatch[] }).search;
      expect(search("create issue comment")[0]).toMatchObject({
        name: "issuesCreateComment",
        tag: "issues",
        signature: expect.stringMatching(
          /^issuesCreateComment\(args: \{ owner: string; repo: string; issue_number: number;/,
        ),
      });
      const diagnostics = await runtime.typecheck(
        'async function main(moss: Moss) { await moss.github.issuesCreateComment({ owner: "o", repo: "r", issue_number: "1", body: { body: "hi" } }); }',
      );
      expect(diagnostics.map((diagnostic) => diagnostic.message).join("\n")).toMatch(
        /'string' is not assignable to type 'number'/,
      );
    } finally {
      await runtime.close();
    }
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}, 120_000);
