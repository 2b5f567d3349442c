// moss.config.yaml (issue 18, seed 000's rule): a module's own `config` section gives defaults, the outer file
// overrides keys under `config` and nothing outside it, `--print-config` shows each value with its source, and a
// bad file is an error located at file:line:column.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadMossConfig } from "../../engine/cli/moss-config.ts";
import { printedSetting, runMoss } from "../helpers/moss-cli.ts";

let directory: string;
beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-config-"));
  await writeFile(join(directory, "context.ts"), "export class Moss {}\n");
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

async function load(outer: string | undefined, own?: string) {
  const file = join(directory, `outer-${Math.random().toString(36).slice(2)}.yaml`);
  if (outer !== undefined) await writeFile(file, outer);
  await rm(join(directory, "context.config.yaml"), { force: true });
  if (own !== undefined) await writeFile(join(directory, "context.config.yaml"), own);
  return { file, config: () => loadMossConfig({ cwd: directory, file, modulePath: "context.ts" }) };
}

describe("moss.config.yaml", () => {
  it("merges the module's own config section with the outer file's overrides, key by key, each with its source", async () => {
    const { file, config } = await load(
      "model:\n  name: small-model\nmodules:\n  ./context.ts:\n    config:\n      nested:\n        b: 3\n",
      "name: ledger\nconfig:\n  greeting: hi\n  nested:\n    a: 1\n    b: 2\n",
    );
    const loaded = await config();
    expect(loaded.moduleConfig()).toEqual({ greeting: "hi", nested: { a: 1, b: 3 } });
    const sources = Object.fromEntries(
      [...loaded.moduleEntries()].map(([path, entry]) => [path, entry.source]),
    );
    const outerName = file.slice(directory.length + 1);
    expect(sources).toEqual({
      greeting: "context.config.yaml:3:13",
      "nested.a": "context.config.yaml:5:8",
      "nested.b": `${outerName}:7:12`,
    });
    expect(loaded.entry("model.name")).toEqual({ value: "small-model", source: `${outerName}:2:9` });
  });

  it("refuses to let the outer file set a module's keys outside its config section, naming file:line:col", async () => {
    const { config } = await load(
      "modules:\n  ./context.ts:\n    name: other\n",
      "name: ledger\nconfig: {}\n",
    );
    await expect(config()).rejects.toMatchObject({
      code: "config-invalid",
      message: expect.stringMatching(
        /^outer-\w+\.yaml:3:5 - only a module.s `config` section and its `host` setup file can be set here/,
      ),
    });
  });

  it("locates unknown keys (with a suggestion), wrong types and YAML syntax errors", async () => {
    const unknown = await load("model:\n  nmae: x\n");
    await expect(unknown.config()).rejects.toThrow(/:2:3 - unknown key `model.nmae` — did you mean `name`\?/);
    const wrongType = await load("limits:\n  maxActiveRuns: many\n");
    await expect(wrongType.config()).rejects.toThrow(
      /:2:18 - `limits.maxActiveRuns` must be an integer of at least 1, got "many"/,
    );
    const syntax = await load("model:\n  name: [unclosed\n");
    await expect(syntax.config()).rejects.toMatchObject({
      code: "config-invalid",
      message: expect.stringMatching(/:\d+:\d+ - /),
    });
    const missing = loadMossConfig({ cwd: directory, file: "nope.yaml", modulePath: "context.ts" });
    await expect(missing).rejects.toThrow(/nope\.yaml: cannot read the config file/);
  });

  it("names every problem of a file at once, each located, in file order", async () => {
    const { file, config } = await load(
      "model:\n  nmae: x\nlimits:\n  maxActiveRuns: many\nagent:\n  maxStepz: 3\n",
    );
    const failure = (await config().then(
      () => undefined,
      (error: unknown) => error,
    )) as { code: string; message: string; details: { line: number; problems: Array<{ line: number }> } };
    expect(failure.code).toBe("config-invalid");
    const lines = failure.message.split("\n");
    expect(lines[0]).toMatch(/:2:3 - unknown key `model.nmae` — did you mean `name`\?/);
    expect(lines[1]).toMatch(/:4:18 - `limits.maxActiveRuns` must be an integer of at least 1, got "many"/);
    expect(lines[2]).toMatch(/:6:3 - unknown key `agent.maxStepz` — did you mean `maxSteps`\?/);
    expect(lines[3]).toBe(`${file.slice(directory.length + 1)}: 3 problems`);
    expect(failure.details.line).toBe(2);
    expect(failure.details.problems.map((problem) => problem.line)).toEqual([2, 4, 6]);
  });

  it("is optional: without a file every value is the default", async () => {
    const loaded = await loadMossConfig({ cwd: directory, modulePath: "context.ts" });
    expect(loaded.entry("model.name")).toBeUndefined();
    expect(loaded.moduleConfig()).toEqual({});
  });

  it("moss serve --print-config shows every setting in effect: flag over environment over file over default", async () => {
    const { file } = await load(
      "model:\n  name: from-file\n  baseUrl: http://file.example/v1\nserve:\n  port: 9000\ntokens:\n  - alice:secret-in-file\nlimits:\n  tenants:\n    alice:\n      maxActiveRuns: 2\nmodules:\n  ./context.ts:\n    config:\n      greeting: hello\n",
      "config:\n  greeting: hi\n  other: 1\n",
    );
    const result = await runMoss(
      ["serve", join(directory, "context.ts"), "--config", file, "--print-config", "--port", "7000"],
      {
        env: {
          OPENAI_BASE_URL: "http://env.example/v1",
          MOSS_MODEL: "",
          DATABASE_URL: "",
          MOSS_SERVE_TOKENS: "",
        },
      },
    );
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const line = (path: string) => printedSetting(result.stdout, path);
    expect(line("serve.port")).toBe("serve.port 7000 # --port");
    expect(line("model.baseUrl")).toBe('model.baseUrl "http://env.example/v1" # $OPENAI_BASE_URL');
    expect(line("model.name")).toMatch(/^model\.name "from-file" # .*outer-\w+\.yaml:2:9$/);
    expect(line("serve.host")).toBe('serve.host "127.0.0.1" # default');
    expect(line("limits.tenants.alice.maxActiveRuns")).toMatch(/ 2 # .*:11:22$/);
    expect(line("tokens.alice")).toMatch(/"alice:\*\*\*"/);
    expect(result.stdout).not.toContain("secret-in-file");
    expect(line(`modules.${join(directory, "context.ts")}.config.greeting`)).toMatch(/"hello" # /);
    expect(line(`modules.${join(directory, "context.ts")}.config.other`)).toMatch(
      / 1 # .*context\.config\.yaml:3:10$/,
    );
    // A setting nothing sets is listed too, with what applies instead.
    expect(line("model.maxTokens")).toMatch(/^model\.maxTokens \(not set\) # otherwise 2048\b/);
    expect(line("store.databaseUrl")).toBe("store.databaseUrl (not set) # nothing sets it");
  }, 60_000);
});
