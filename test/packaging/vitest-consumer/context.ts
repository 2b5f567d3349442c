import { Moss as Parent } from "moss-ts";
import { Shop } from "./shop.ts";

/** You run the shop through `moss.shop`. */
export class Moss extends Parent {
  /** The shop. */
  shop!: Shop;
}

// <moss-hide>
import type { MossCompiler } from "moss-ts";
import { MemoryShop } from "./shop.ts";

export function __moss_test_setup__(compiler: MossCompiler): void {
  compiler.bind(Shop, new MemoryShop());
}

export const __moss_test_cases__ = ["testOrder"];

export async function testOrder(moss: Moss): Promise<number> {
  return moss.shop.placeOrder("tea");
}
// </moss-hide>
