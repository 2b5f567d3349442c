import { expect, test } from "vitest";
import { checkCorpus, corpusFiles } from "./oas-corpus.ts";

test("every OpenAPI 3.0 document of @readme/oas-examples loads, declares types that check, and renders a prompt", async () => {
  const files = await corpusFiles("3.0", "json");
  expect(files.length).toBeGreaterThan(30);
  await checkCorpus(files);
}, 120_000);
