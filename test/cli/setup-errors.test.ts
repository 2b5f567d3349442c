import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { EXIT } from "../../engine/cli/exit-codes.ts";
import { runMoss } from "../helpers/moss-cli.ts";

// Setup errors say where and what to do: an error thrown in a host setup file names its file and line with a code
// frame, and exits 4 (an input could not be used) from every command; a host setup in a CommonJS package is told
// to add "type": "module" instead of Node's "Cannot require() ES Module … in a cycle".
const SHOP = path.resolve("test/cli/fixtures/shop/context.ts");
const HOST = path.resolve("test/cli/fixtures/shop/context.host.ts");
let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(path.join(tmpdir(), "moss-setup-errors-"));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

describe("a host setup that throws", () => {
  test("prompt, run and agent exit 4 naming the setup file, line and column, with the line of code", async () => {
    const env = { MOSS_SHOP_SETUP_FAILS: "1", MOSS_SHOP_LOG: path.join(directory, "shop.log") };
    const replay = path.join(directory, "replay.json");
    await writeFile(replay, JSON.stringify({ responses: [{ content: "Done." }] }));
    const runs = await Promise.all([
      runMoss(["prompt", SHOP], { env }),
      runMoss(["run", SHOP, "--code", "-", "--sandbox", "in-process"], {
        env,
        input: "async function main(moss: Moss) {}",
      }),
      runMoss(["agent", SHOP, "Place an order", "--replay", replay], { env }),
    ]);
    for (const result of runs) {
      expect(result.code).toBe(EXIT.input);
      expect(result.stderr).toContain(
        `${HOST}:22:48 - setup(compiler) failed: Error: the database is not reachable`,
      );
      expect(result.stderr).toContain(
        '> 22 |   if (process.env.MOSS_SHOP_SETUP_FAILS) throw new Error("the database is not reachable");',
      );
    }
    const tested = await runMoss(["test", SHOP, "--host"], { env });
    expect(tested.code).toBe(EXIT.input);
    expect(tested.stdout).toContain(`${HOST}:22:48 - setup(compiler) failed`);
  });
});

describe("a host setup in a CommonJS package", () => {
  test('is told to add "type": "module" to the package.json it sits in', async () => {
    await writeFile(path.join(directory, "package.json"), '{ "name": "cjs-project" }\n');
    await mkdir(path.join(directory, "node_modules"));
    await symlink(path.resolve("."), path.join(directory, "node_modules", "moss-ts"));
    await writeFile(
      path.join(directory, "services.ts"),
      'export class Greeter {\n  hello(name: string): string {\n    return "hi " + name;\n  }\n}\n',
    );
    await writeFile(
      path.join(directory, "context.ts"),
      'import { Moss as Parent } from "moss-ts";\nimport { Greeter } from "./services.ts";\nexport class Moss extends Parent {\n  greeter!: Greeter;\n}\n',
    );
    const host = path.join(directory, "context.host.ts");
    await writeFile(
      host,
      'import type { MossCompiler } from "moss-ts";\nimport { Greeter } from "./services.ts";\nexport function setup(compiler: MossCompiler) {\n  compiler.bind(Greeter, new Greeter());\n}\n',
    );
    const result = await runMoss(["prompt", path.join(directory, "context.ts")]);
    // Node 22+ detects ES module syntax in such a file and loads it: there is then nothing to be told.
    if (Number(process.versions.node.split(".")[0]) >= 22 && result.code === 0) {
      expect(result.stdout).toContain("greeter!: Greeter");
      return;
    }
    expect(result.code).toBe(EXIT.input);
    // Node 20 fails on the host setup; Node 22+ loads it (ES module syntax detection) and fails on the context
    // module, which the compiler loads with a query. Either way the file is named and the fix is said.
    const failed = [
      `${host}: loading the host setup failed`,
      `${path.join(directory, "context.ts")} - loading the context module failed`,
    ];
    expect(
      failed.some((line) => result.stderr.includes(line)),
      result.stderr,
    ).toBe(true);
    expect(result.stderr).toContain(`add "type": "module" to ${path.join(directory, "package.json")}`);
    expect(result.stderr).not.toMatch(/in a cycle/);
  });
});

describe('a context module in a package with "type": "commonjs" (what npm init -y writes)', () => {
  test("is told the cause first, then what to do, with no loader query in the path", async () => {
    await writeFile(path.join(directory, "package.json"), '{ "name": "cjs-project", "type": "commonjs" }\n');
    await mkdir(path.join(directory, "node_modules"));
    await symlink(path.resolve("."), path.join(directory, "node_modules", "moss-ts"));
    await writeFile(
      path.join(directory, "services.ts"),
      'export class Greeter {\n  hello(name: string): string {\n    return "hi " + name;\n  }\n}\n',
    );
    const module = path.join(directory, "context.ts");
    await writeFile(
      module,
      'import { Moss as Parent } from "moss-ts";\nimport { Greeter } from "./services.ts";\nexport class Moss extends Parent {\n  greeter!: Greeter;\n}\n',
    );
    const result = await runMoss(["prompt", module]);
    expect(result.code).toBe(EXIT.input);
    expect(result.stderr).toMatch(
      /^error\[module-load\]: \S*context\.ts\S* - loading the context module failed: it is not in an ES module package \(below\); Node said: /,
    );
    expect(result.stderr).toContain(`add "type": "module" to ${path.join(directory, "package.json")}`);
    expect(result.stderr).not.toContain("moss-compile");
  });
});
