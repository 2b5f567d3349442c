/** The shop's orders. */
export abstract class Shop {
  /** Places an order for `item` and returns its number. */
  abstract placeOrder(item: string): Promise<number>;
}

/** The fake tests bind: orders are kept in memory. */
export class MemoryShop extends Shop {
  readonly orders: string[] = [];
  async placeOrder(item: string): Promise<number> {
    this.orders.push(item);
    return this.orders.length;
  }
}
