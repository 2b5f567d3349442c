import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { MossTestSuite } from "../../engine/agent/moss-test-suite.ts";
import { EXIT } from "../../engine/cli/exit-codes.ts";
import { MossError } from "../../engine/errors.ts";
import { compileFromText, writeModule } from "../helpers/compile-from-text.ts";
import { runMoss } from "../helpers/moss-cli.ts";
import { MemoryShop, Shop } from "./fixtures/shop/shop.ts";

// Tests run against the fakes a module binds in its hidden __moss_test_setup__(compiler); the production host setup
// (name.host.ts), whose shop appends every call to $MOSS_SHOP_LOG, runs only when asked for.
const SHOP = path.resolve("test/cli/fixtures/shop/context.ts");
let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(path.join(tmpdir(), "moss-test-fakes-"));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});
const log = () => path.join(directory, "shop.log");

describe("moss test binds the module's test fakes, not the production services", () => {
  test("moss test uses __moss_test_setup__ (nothing reaches the real shop); --host runs the host setup", async () => {
    const tested = await runMoss(["test", SHOP], { env: { MOSS_SHOP_LOG: log() } });
    expect(tested.stderr).toBe("");
    expect(tested.code).toBe(EXIT.ok);
    expect(tested.stdout).toMatch(/✓ testOrder/);
    expect(existsSync(log())).toBe(false);

    const real = await runMoss(["test", SHOP, "--host"], { env: { MOSS_SHOP_LOG: log() } });
    expect(real.code).toBe(EXIT.ok);
    expect(await readFile(log(), "utf8")).toBe("order tea\n");
  });

  test("MossTestSuite: fakes by default, { host: true } for the real setup, injections win over both", async () => {
    process.env.MOSS_SHOP_LOG = log();
    try {
      const faked = await new MossTestSuite().run(SHOP, { target: "testOrder" });
      expect(faked.ok).toBe(true);
      expect(existsSync(log())).toBe(false);

      const real = await new MossTestSuite({ host: true }).run(SHOP, { target: "testOrder" });
      expect(real.ok).toBe(true);
      expect(await readFile(log(), "utf8")).toBe("order tea\n");

      const mine = new MemoryShop();
      const injected = await new MossTestSuite().run(SHOP, {
        code: 'async function main(moss: Moss) { return moss.shop.placeOrder("jam"); }',
        inject: [[Shop, mine]],
      });
      expect(injected.ok).toBe(true);
      expect(mine.orders).toEqual(["jam"]);
    } finally {
      delete process.env.MOSS_SHOP_LOG;
    }
  });

  test("with neither test fakes nor --host, a missing binding names the field, the token and where to bind it", async () => {
    const module = await writeModule(
      `import { Moss as Parent } from "moss-ts";
import { Shop } from "../../cli/fixtures/shop/shop.ts";
export class Moss extends Parent {
  shop!: Shop;
}
// <moss-hide>
export const __moss_test_cases__ = [{ name: "orders", code: "async function main(moss: Moss) { return moss.shop.placeOrder('tea'); }" }];
// </moss-hide>
`,
      "no-fakes",
    );
    await writeFile(
      module.replace(/\.ts$/, ".host.ts"),
      'export function setup() { throw new Error("the real database"); }\n',
    );
    try {
      const error = await new MossTestSuite()
        .run(module, { code: "function main() {}" })
        .catch((caught: unknown) => caught);
      expect(MossError.is(error, "binding-missing")).toBe(true);
      expect((error as Error).message).toMatch(/Moss\.shop needs a service for token Shop/);
      expect((error as Error).message).toContain("__moss_test_setup__(compiler)");
      expect((error as Error).message).toContain("moss test --host");

      const cli = await runMoss(["test", module]);
      // The module cannot be used as it is: exit 4, like a broken host setup.
      expect(cli.code).toBe(EXIT.input);
      expect(cli.stdout).toContain("Moss.shop needs a service for token Shop");
      expect(cli.stdout).toContain("__moss_test_setup__");
      expect(cli.stdout).not.toContain("the real database");
    } finally {
      await rm(module, { force: true });
      await rm(module.replace(/\.ts$/, ".host.ts"), { force: true });
    }
  });

  test("the compiler runs __moss_test_setup__ only when asked, and its fakes win over __moss_compile__ defaults", async () => {
    const source = `import { Moss as Parent, type MossCompiler } from "moss-ts";
export interface Weather { today(): string }
export class Moss extends Parent { weather!: Weather; }
// <moss-hide>
export function __moss_test_setup__(compiler: MossCompiler) { compiler.bind("Weather", { today: () => "fake" }); }
export function __moss_compile__(compiler: MossCompiler) { compiler.bind("Weather", { today: () => "module default" }); }
// </moss-hide>
`;
    const code = "function main(moss: Moss) { return moss.weather.today(); }";
    const today = async (options: { testSetup?: boolean }, bind?: string) => {
      const runtime = await compileFromText(
        source,
        (compiler) => {
          if (bind !== undefined) compiler.bind("Weather", { today: () => bind });
        },
        options,
      );
      try {
        return (await runtime.execute({ code })).returns;
      } finally {
        await runtime.close();
      }
    };
    expect(await today({})).toBe("module default");
    expect(await today({ testSetup: true })).toBe("fake");
    expect(await today({ testSetup: true }, "the test's own")).toBe("the test's own");
  });
});
