// The settings table (engine/cli/settings.ts) is the one place a setting of `moss serve`, `moss worker` and
// `moss agent` is written: these tests keep its page (docs/reference/settings.md), each command's --help, flags and
// --print-config, and the schema of moss.config.yaml equal to it.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CliIo } from "../../engine/cli/cli-io.ts";
import { main } from "../../engine/cli/main.ts";
import { loadMossConfig } from "../../engine/cli/moss-config.ts";
import {
  hasFlag,
  helpText,
  SETTINGS,
  type SettingsCommand,
  settingsOf,
  settingsReference,
} from "../../engine/cli/settings.ts";
import {
  DEFAULT_CONCURRENCY,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_TAKEOVERS,
  DEFAULT_TENANT_LIMITS,
} from "../../engine/server-defaults.ts";
import { DEFAULT_MAX_ERRORS, DEFAULT_MAX_STEPS } from "../../engine/stop-reasons.ts";

const COMMANDS: SettingsCommand[] = ["serve", "worker", "agent"];

let directory: string;
beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "moss-settings-"));
  await writeFile(join(directory, "context.ts"), "export class Context {}\n");
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});

/** Runs `moss <argv>` in this process with no environment, in the temporary folder. */
async function moss(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const sink = (write: (text: string) => void) =>
    new Writable({
      write(chunk, _encoding, done) {
        write(String(chunk));
        done();
      },
    });
  const io: CliIo = {
    stdout: sink((text) => (stdout += text)),
    stderr: sink((text) => (stderr += text)),
    stdin: new PassThrough(),
    env: {},
    cwd: directory,
  };
  const code = await main(argv, io);
  return { code, stdout, stderr };
}

/** Text with its line breaks and runs of spaces as one space (usage lines wrap). */
const flat = (text: string) => text.replace(/\s+/g, " ");

describe("the settings table", () => {
  it("is docs/reference/settings.md: after a change, run node scripts/settings-doc.js and commit the page", async () => {
    expect(await readFile("docs/reference/settings.md", "utf8")).toBe(settingsReference());
  });

  it("names each path, flag and environment variable once", () => {
    for (const key of ["path", "flag", "env"] as const) {
      const names = SETTINGS.map((entry) => entry[key]).filter((name) => name !== undefined);
      expect(new Set(names).size, key).toBe(names.length);
    }
  });

  it("holds the defaults the agent and the server apply themselves", () => {
    const defaults = Object.fromEntries(SETTINGS.map((entry) => [entry.path, entry.default]));
    expect(defaults).toMatchObject({
      "agent.maxSteps": DEFAULT_MAX_STEPS,
      "agent.maxErrors": DEFAULT_MAX_ERRORS,
      "worker.concurrency": DEFAULT_CONCURRENCY,
      "worker.leaseMs": DEFAULT_LEASE_MS,
      "worker.maxTakeovers": DEFAULT_MAX_TAKEOVERS,
      "limits.maxActiveRuns": DEFAULT_TENANT_LIMITS.maxActiveRuns,
      "limits.maxBodyBytes": DEFAULT_TENANT_LIMITS.maxBodyBytes,
    });
  });

  it.each(COMMANDS)(
    "moss %s --help shows each flag it takes with the table's help and default",
    async (command) => {
      const { code, stdout } = await moss([command, "--help"]);
      expect(code).toBe(0);
      for (const entry of settingsOf(command)) {
        if (hasFlag(entry, command)) expect(flat(stdout)).toContain(flat(`--${entry.flag}`));
        if (hasFlag(entry, command)) expect(flat(stdout)).toContain(flat(helpText(entry)));
        else if (entry.flag !== undefined) expect(stdout).not.toMatch(new RegExp(`--${entry.flag}\\b`));
      }
    },
  );

  it("moss worker refuses the flags of moss serve's settings, moss agent does not know the server's", async () => {
    for (const entry of SETTINGS) {
      if (entry.flag === undefined) continue;
      const value = entry.kind === "off" ? [] : ["1"];
      if (hasFlag(entry, "serve") && !hasFlag(entry, "worker")) {
        const refused = await moss(["worker", "context.ts", `--${entry.flag}`, ...value]);
        expect(refused.code).toBe(2);
        expect(refused.stderr).toContain(`--${entry.flag} is an option of moss serve, not moss worker`);
      }
      if (!hasFlag(entry, "agent")) {
        const unknown = await moss(["agent", "context.ts", "task", `--${entry.flag}`, ...value]);
        expect(unknown.code).toBe(2);
        expect(unknown.stderr).toContain(`unknown option --${entry.flag}`);
      }
    }
  });

  it.each(COMMANDS)(
    "moss %s --print-config shows each default of the table as the default",
    async (command) => {
      const { code, stdout, stderr } = await moss([command, "context.ts", "--print-config"]);
      expect(stderr).toBe("");
      expect(code).toBe(0);
      const lines = stdout.split("\n").map((line) => line.replace(/\s+/g, " "));
      for (const entry of settingsOf(command)) {
        if (entry.default === undefined) continue;
        expect(lines).toContain(`${entry.path} ${JSON.stringify(entry.default)} # default`);
      }
    },
  );

  it("moss.config.yaml takes each setting's key with a value of its kind, and refuses an integer under its bound", async () => {
    const file = join(directory, "every.yaml");
    const values = new Map<string, unknown>();
    for (const entry of SETTINGS) {
      if (entry.inFile === false) continue;
      const value =
        entry.kind === "integer"
          ? (entry.min ?? 0) + 1
          : entry.kind === "off"
            ? false
            : entry.kind === "list"
              ? ["a:b"]
              : entry.kind === "choice"
                ? entry.choices![0]
                : "text";
      values.set(entry.path, value);
    }
    await writeFile(file, JSON.stringify(nested([...values])));
    const config = await loadMossConfig({ cwd: directory, file, modulePath: "context.ts" });
    for (const [path, value] of values) expect(config.get(path), path).toEqual(value);

    for (const entry of SETTINGS) {
      if (entry.kind !== "integer" || entry.inFile === false) continue;
      await writeFile(file, JSON.stringify(nested([[entry.path, (entry.min ?? 0) - 1]])));
      await expect(loadMossConfig({ cwd: directory, file, modulePath: "context.ts" })).rejects.toThrow(
        `\`${entry.path}\` must be an integer of at least ${entry.min ?? 0}`,
      );
    }
  });
});

/** `[["a.b", 1]]` as `{ a: { b: 1 } }` (JSON is YAML too). */
function nested(values: Array<[string, unknown]>): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [path, value] of values) {
    const keys = path.split(".");
    let node = root;
    for (const key of keys.slice(0, -1)) node = (node[key] ??= {}) as Record<string, unknown>;
    node[keys.at(-1)!] = value;
  }
  return root;
}
