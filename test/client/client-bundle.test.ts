// moss-ts/client runs in browsers: it bundles for the browser platform with nothing from Node.
import { build } from "esbuild";
import { expect, it } from "vitest";

it("bundles for the browser without any Node built-in", async () => {
  const result = await build({
    entryPoints: ["client/index.ts"],
    bundle: true,
    platform: "browser",
    format: "esm",
    write: false,
    metafile: true,
    logLevel: "silent",
  });
  const inputs = Object.keys(result.metafile.inputs);
  expect(
    inputs.filter((input) => input.startsWith("node:") || !/^(client\/|node_modules\/)/.test(input)),
  ).toEqual([]);
  expect(inputs).toContain("node_modules/eventsource-parser/dist/index.js");
});
