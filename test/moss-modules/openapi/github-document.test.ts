import { createRequire } from "node:module";
import { expect, test } from "vitest";
import { openApiService } from "../../../moss-modules/openapi/index.ts";

const require = createRequire(import.meta.url);
const GITHUB = require.resolve("@octokit/openapi/generated/api.github.com.json");

test("GitHub's full REST document loads and becomes a compact index with describe()", async () => {
  const binding = await openApiService("GitHub", GITHUB, { validate: false, include: ["reposGet"] });
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
