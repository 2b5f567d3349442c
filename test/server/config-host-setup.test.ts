// moss.config.yaml's `modules.<name>.host` (issue 18: "modules with their host setup"): the host setup file that
// binds a module's real services is named in the config, relative to the config file, and used by `moss agent`,
// `moss serve` and `moss worker` instead of the module's sibling `<name>.host.ts`; `--print-config` (also of
// `moss agent`) shows every value with where it came from; a path that is not there is a located error.
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadMossConfig } from "../../engine/cli/moss-config.ts";
import { type FakeOpenAIServer, type FakeReply, startFakeOpenAIServer } from "../agent/fake-openai-server.ts";
import { printedSetting, runMoss } from "../helpers/moss-cli.ts";
import { call, readEvents, runSettles, serveArguments, spawnServe } from "./server-harness.ts";

const LEDGER_MODULE = resolve("test/server/fixtures/ledger/context.ts");
const RECORD = "async function main(moss: Moss) {\n  return await moss.ledger.record('noted');\n}";

let directory: string;
let configFile: string;
let ledgerLog: string;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-config-host-"));
  ledgerLog = join(directory, "ledger.log");
  // The config lives in deploy/, the setup file beside it in deploy/hosts/: the path resolves from the config file.
  await mkdir(join(directory, "deploy", "hosts"), { recursive: true });
  await writeFile(join(directory, "deploy", "package.json"), '{ "type": "module" }\n');
  await writeFile(
    join(directory, "deploy", "hosts", "tagged-ledger.ts"),
    [
      'import { appendFileSync } from "node:fs";',
      `import { Ledger } from ${JSON.stringify(resolve("test/server/fixtures/ledger/ledger.ts"))};`,
      "class TaggedLedger extends Ledger {",
      "  async record(note: string): Promise<number> {",
      "    appendFileSync(process.env.MOSS_LEDGER_LOG!, 'configured:' + note + '\\n');",
      "    return 1;",
      "  }",
      "}",
      "export function setup(compiler: { bind(token: unknown, value: unknown): void }): void {",
      "  compiler.bind(Ledger, new TaggedLedger());",
      "}",
      "",
    ].join("\n"),
  );
  configFile = join(directory, "deploy", "moss.config.yaml");
  await writeFile(
    configFile,
    `model:\n  name: from-file\nmodules:\n  ${LEDGER_MODULE}:\n    host: ./hosts/tagged-ledger.ts\n    config:\n      greeting: hello\n`,
  );
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

describe("modules.<name>.host", () => {
  it("names the module's host setup file, resolved relative to the config file, with its source", async () => {
    const config = await loadMossConfig({ cwd: directory, file: configFile, modulePath: LEDGER_MODULE });
    expect(config.hostSetup()).toEqual({
      value: join(directory, "deploy", "hosts", "tagged-ledger.ts"),
      source: "deploy/moss.config.yaml:5:11",
    });
  });

  it("a host path that is not there is an error located at the config's line and column", async () => {
    const bad = join(directory, "deploy", "bad.yaml");
    await writeFile(bad, `modules:\n  ${LEDGER_MODULE}:\n    config: {}\n    host: ./hosts/missing.ts\n`);
    await expect(
      loadMossConfig({ cwd: directory, file: bad, modulePath: LEDGER_MODULE }),
    ).rejects.toMatchObject({
      code: "config-invalid",
      message: expect.stringMatching(
        /^deploy\/bad\.yaml:4:11 - `modules\..*\.host`: no host setup file at .*deploy\/hosts\/missing\.ts/,
      ),
    });
    // The command says the same and exits as for a bad input.
    const result = await runMoss(["agent", LEDGER_MODULE, "--config", bad, "--print-config"], {
      cwd: directory,
    });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/deploy\/bad\.yaml:4:11 - `modules\..*\.host`: no host setup file/);
  }, 60_000);

  it("moss agent uses it instead of the sibling context.host.ts", async () => {
    const replay = join(directory, "replay.json");
    await writeFile(
      replay,
      JSON.stringify([{ toolCalls: [{ name: "moss", arguments: { code: RECORD } }] }, { content: "Done." }]),
    );
    const result = await runMoss(
      ["agent", LEDGER_MODULE, "Note it.", "--config", configFile, "--replay", replay],
      { env: { MOSS_LEDGER_LOG: ledgerLog } },
    );
    expect(result.code, result.stderr).toBe(0);
    expect(await readFile(ledgerLog, "utf8")).toBe("configured:noted\n");
    await rm(ledgerLog, { force: true });
  }, 120_000);

  it("moss serve uses it for every thread's runs", async () => {
    const replies: FakeReply[] = [
      { content: "", toolCalls: [{ name: "moss", arguments: JSON.stringify({ code: RECORD }) }] },
      { content: "Done." },
    ];
    const model: FakeOpenAIServer = await startFakeOpenAIServer(replies);
    const serve = await spawnServe(
      [...serveArguments(LEDGER_MODULE, directory, model.baseUrl), "--config", configFile],
      { MOSS_LEDGER_LOG: ledgerLog, OPENAI_API_KEY: "test", MOSS_SERVE_TOKENS: "", DATABASE_URL: "" },
    );
    try {
      const created = await call(serve, "POST", "/v1/threads", { body: { id: "hosted" } });
      expect(created.status).toBe(201);
      await call(serve, "POST", "/v1/threads/hosted/runs", { body: { message: "Note it." } });
      const events = await readEvents(serve, "hosted", runSettles);
      expect(events.at(-1)!.data.status).toBe("completed");
      expect(await readFile(ledgerLog, "utf8")).toBe("configured:noted\n");
    } finally {
      serve.child.kill("SIGTERM");
      await serve.exited;
      await model.close();
      await rm(ledgerLog, { force: true });
    }
  }, 180_000);
});

describe("--print-config", () => {
  it("moss agent prints the merged settings with the source of each: flag, environment, file, default", async () => {
    const result = await runMoss(
      ["agent", LEDGER_MODULE, "--config", configFile, "--print-config", "--max-steps", "4"],
      { cwd: directory, env: { OPENAI_BASE_URL: "http://env.example/v1", MOSS_MODEL: "" } },
    );
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const line = (path: string) => printedSetting(result.stdout, path);
    expect(line("agent.maxSteps")).toBe("agent.maxSteps 4 # --max-steps");
    expect(line("model.baseUrl")).toBe('model.baseUrl "http://env.example/v1" # $OPENAI_BASE_URL');
    expect(line("model.name")).toBe('model.name "from-file" # deploy/moss.config.yaml:2:9');
    expect(line("agent.maxErrors")).toBe("agent.maxErrors 3 # default");
    expect(line("sessionsDir")).toBe(
      `sessionsDir ${JSON.stringify(join(directory, ".moss", "sessions"))} # store.dataDir`,
    );
    expect(line(`modules.${LEDGER_MODULE}.host`)).toBe(
      `modules.${LEDGER_MODULE}.host ${JSON.stringify(join(directory, "deploy", "hosts", "tagged-ledger.ts"))} # deploy/moss.config.yaml:5:11`,
    );
    expect(line(`modules.${LEDGER_MODULE}.config.greeting`)).toBe(
      `modules.${LEDGER_MODULE}.config.greeting "hello" # deploy/moss.config.yaml:7:17`,
    );
  }, 60_000);

  it("moss worker and moss serve show the host setup file with where it was named", async () => {
    for (const command of ["worker", "serve"]) {
      const result = await runMoss([command, LEDGER_MODULE, "--config", configFile, "--print-config"], {
        cwd: directory,
        env: { DATABASE_URL: "", MOSS_SERVE_TOKENS: "" },
      });
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toMatch(
        new RegExp(
          `^modules\\.${LEDGER_MODULE.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}\\.host\\s+".*tagged-ledger\\.ts"\\s+# deploy/moss\\.config\\.yaml:5:11$`,
          "m",
        ),
      );
    }
  }, 60_000);
});

describe("modules.<name>.config in moss agent", () => {
  const GREETER = resolve("test/server/fixtures/greeter/context.ts");

  it("binds the module's config section (its own defaults under the outer file's overrides) as moss.config, as moss serve does", async () => {
    const replay = join(directory, "greet.json");
    await writeFile(
      replay,
      JSON.stringify([
        {
          toolCalls: [
            {
              name: "moss",
              arguments: {
                code: 'async function main(moss: Moss) {\n  console.log(await moss.greeter.greet("Ada"));\n}',
              },
            },
          ],
        },
        { content: "Greeted." },
      ]),
    );
    const own = await runMoss(["agent", GREETER, "Greet Ada.", "--replay", replay], { cwd: directory });
    expect(own.code, own.stderr).toBe(0);
    expect(own.stdout).toContain("Hi, Ada");
    const outer = join(directory, "greeter.yaml");
    await writeFile(outer, `modules:\n  ${GREETER}:\n    config:\n      greeting: Hello\n`);
    const overridden = await runMoss(
      ["agent", GREETER, "Greet Ada.", "--replay", replay, "--config", outer],
      {
        cwd: directory,
      },
    );
    expect(overridden.code, overridden.stderr).toBe(0);
    expect(overridden.stdout).toContain("Hello, Ada");
  }, 120_000);
});
