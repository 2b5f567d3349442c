// Issue 27: `moss prompt` and `moss check` keep their results, also for a module with a host setup file, and a kept
// result answers exactly what a fresh process would: each input the answer depends on is edited here in turn (the
// module, a file it imports, a file it reads, the host setup file and a file it imports, package.json,
// tsconfig.json, an environment variable the module reads, the working directory) and the next answer changes.
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { runMoss } from "../helpers/moss-cli.ts";

const CONTEXT = `import { readFileSync } from "node:fs";
import path from "node:path";
import { MAPPED } from "#mapped";
import { NOTE } from "./note.ts";

/** A counter. */
export class Moss {
  count = 0;
}

class Probe {
  field?: string;
}

// <moss-hide>
export function __moss_module_prompt__(): string {
  const data = readFileSync(new URL("./data.txt", import.meta.url), "utf8").trim();
  const host = (globalThis as { mossTestHostNote?: string }).mossTestHostNote;
  const fields = Object.keys(new Probe()).join(",");
  return \`note=\${NOTE} mapped=\${MAPPED} env=\${process.env.MOSS_TEST_NOTE} cwd=\${path.basename(process.cwd())} data=\${data} host=\${host} fields=\${fields}\\n\`;
}

export function __moss_compile__(compiler: { withLocals(locals: Record<string, unknown>): unknown }): void {
  compiler.withLocals({ [\`env_\${process.env.MOSS_TEST_NOTE}\`]: 1, [\`cwd_\${path.basename(process.cwd())}\`]: 1 });
}
// </moss-hide>
`;
const HOST_SETUP = `import { HOST } from "./host-note.ts";

export function setup(compiler: { withLocals(locals: Record<string, unknown>): unknown }): void {
  (globalThis as { mossTestHostNote?: string }).mossTestHostNote = HOST;
  compiler.withLocals({ [HOST]: 1 });
}
`;
const PACKAGE = (mapped: string) => `${JSON.stringify({ type: "module", imports: { "#mapped": mapped } })}\n`;
const TSCONFIG = (define: boolean) =>
  `${JSON.stringify({ compilerOptions: { useDefineForClassFields: define } })}\n`;

describe("kept results of moss prompt and moss check answer what a fresh process would", () => {
  let temp: string;
  let folder: string;
  let module: string;
  let cacheFolder: string;
  const cwds: Record<string, string> = {};
  const at = (name: string) => path.join(folder, name);
  const edit = async (name: string, from: string, to: string) => {
    const text = await readFile(at(name), "utf8");
    expect(text).toContain(from);
    await writeFile(at(name), text.replace(from, to));
  };
  const moss = (args: string[], options: { input?: string; cwd?: string; note?: string } = {}) =>
    runMoss(args, {
      ...(options.input === undefined ? {} : { input: options.input }),
      cwd: options.cwd ?? cwds.a,
      env: { TMPDIR: temp, MOSS_TEST_NOTE: options.note ?? "one" },
    });
  const prompt = async (options: { cwd?: string; note?: string } = {}) => {
    const result = await moss(["prompt", module], options);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    return result.stdout;
  };

  beforeAll(async () => {
    temp = await mkdtemp(path.join(tmpdir(), "moss-kept-results-"));
    cacheFolder = path.join(temp, `moss-ts-${process.getuid?.()}`, "result-cache");
    folder = path.join(temp, "project");
    await mkdir(folder);
    for (const name of ["a", "b"]) {
      cwds[name] = path.join(temp, name);
      await mkdir(cwds[name]!);
    }
    module = path.join(folder, "context.ts");
    await writeFile(module, CONTEXT);
    await writeFile(at("note.ts"), 'export const NOTE = "first";\n');
    await writeFile(at("mapped-a.ts"), 'export const MAPPED = "a";\n');
    await writeFile(at("mapped-b.ts"), 'export const MAPPED = "b";\n');
    await writeFile(at("data.txt"), "plain\n");
    await writeFile(at("context.host.ts"), HOST_SETUP);
    await writeFile(at("host-note.ts"), 'export const HOST = "alpha";\n');
    await writeFile(at("package.json"), PACKAGE("./mapped-a.ts"));
    await writeFile(at("tsconfig.json"), TSCONFIG(true));
  });
  afterAll(async () => {
    await rm(temp, { recursive: true, force: true });
  });

  test("moss prompt of a module with a host setup file: kept, and every input's edit shows in the next prompt", async () => {
    const first = await prompt();
    expect(first).toBe("note=first mapped=a env=one cwd=a data=plain host=alpha fields=field\n");
    const entries = await readdir(cacheFolder);
    expect(entries).toHaveLength(1);
    // The kept prompt is what a repeated command prints: a changed entry shows through.
    const entryFile = path.join(cacheFolder, entries[0]!);
    const entry = JSON.parse(await readFile(entryFile, "utf8")) as { result: { prompt: string } };
    const kept = entry.result.prompt;
    entry.result.prompt = "the kept prompt\n";
    await writeFile(entryFile, JSON.stringify(entry));
    expect(await prompt()).toBe("the kept prompt\n");
    expect((await moss(["prompt", module, "--no-cache"])).stdout).toBe(first);
    entry.result.prompt = kept;
    await writeFile(entryFile, JSON.stringify(entry));

    let expected = first;
    const next = async (from: string, to: string, options: { cwd?: string; note?: string } = {}) => {
      expected = expected.replace(from, to);
      expect(await prompt(options)).toBe(expected);
    };
    await edit("context.ts", "note=", "Note=");
    await next("note=", "Note=");
    await edit("note.ts", "first", "second");
    await next("Note=first", "Note=second");
    await edit("data.txt", "plain", "edited");
    await next("data=plain", "data=edited");
    await edit("host-note.ts", "alpha", "beta");
    await next("host=alpha", "host=beta");
    await edit("context.host.ts", "mossTestHostNote = HOST", 'mossTestHostNote = HOST + "!"');
    await next("host=beta", "host=beta!");
    await writeFile(at("package.json"), PACKAGE("./mapped-b.ts"));
    await next("mapped=a", "mapped=b");
    await writeFile(at("tsconfig.json"), TSCONFIG(false));
    await next("fields=field", "fields=");
    await next("env=one", "env=two", { note: "two" });
    await next("cwd=a", "cwd=b", { note: "two", cwd: cwds.b });
    // And back: each answer is the fresh one for the inputs as they are now.
    await next("env=two cwd=b", "env=one cwd=a");
  }, 600_000);

  test("moss check of a module with a host setup file: kept, and every input its names come from is checked again", async () => {
    const code = "async function main(moss: Moss) {\n  return moss.count + alpha + env_one + cwd_a;\n}\n";
    const check = (options: { cwd?: string; note?: string } = {}) =>
      moss(["check", module, "--code", "-"], { input: code, ...options });
    await writeFile(at("host-note.ts"), 'export const HOST = "alpha";\n');
    const before = (await readdir(cacheFolder)).length;
    expect(await check()).toEqual({ code: 0, stdout: "No errors.\n", stderr: "" });
    expect((await readdir(cacheFolder)).length).toBe(before + 1);
    expect(await check()).toEqual({ code: 0, stdout: "No errors.\n", stderr: "" });

    const fails = async (name: string, options: { cwd?: string; note?: string } = {}) => {
      const result = await check(options);
      expect(result.code).toBe(1);
      expect(result.stdout).toContain(`Cannot find name '${name}'`);
    };
    // The host setup file's import names the local.
    await writeFile(at("host-note.ts"), 'export const HOST = "gamma";\n');
    await fails("alpha");
    await writeFile(at("host-note.ts"), 'export const HOST = "alpha";\n');
    expect((await check()).code).toBe(0);
    // The host setup file itself.
    await edit("context.host.ts", "withLocals({ [HOST]: 1 })", 'withLocals({ [HOST + "2"]: 1 })');
    await fails("alpha");
    await edit("context.host.ts", 'withLocals({ [HOST + "2"]: 1 })', "withLocals({ [HOST]: 1 })");
    expect((await check()).code).toBe(0);
    // The environment and the working directory the module's __moss_compile__ reads.
    await fails("env_one", { note: "two" });
    await fails("cwd_a", { cwd: cwds.b });
    // The module.
    await edit("context.ts", "count = 0;", "total = 0;");
    const afterModuleEdit = await check();
    expect(afterModuleEdit.code).toBe(1);
    expect(afterModuleEdit.stdout).toContain("Property 'count' does not exist");
  }, 600_000);
});
