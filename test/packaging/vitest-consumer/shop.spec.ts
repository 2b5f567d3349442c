import { MossTestSuite } from "moss-ts";
import { expect, test } from "vitest";
import { MemoryShop, Shop } from "./shop.ts";

test("the module's test cases pass against the fakes of its __moss_test_setup__", async () => {
  const report = await new MossTestSuite().runModuleTests("context.ts");
  const outcome = report.results.map((result) => ({
    name: result.name,
    ok: result.ok,
    returns: result.execution?.returns,
    error: result.error === undefined ? undefined : String(result.error),
  }));
  expect(outcome).toEqual([{ name: "testOrder", ok: true, returns: 1, error: undefined }]);
});

test("a fake the test injects is the very object the model's code calls", async () => {
  const shop = new MemoryShop();
  const execution = await new MossTestSuite().run("context.ts", {
    code: 'async function main(moss: Moss) { return moss.shop.placeOrder("jam"); }',
    inject: [[Shop, shop]],
  });
  expect(execution.error).toBeUndefined();
  expect(shop.orders).toEqual(["jam"]);
});
