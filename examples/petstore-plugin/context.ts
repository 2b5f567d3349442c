import { Moss as Parent } from "moss-ts";
import type { PetStore } from "./plugin/pet-store.api.ts";

/**
 * You help visitors of a pet store find and adopt pets. `moss.petstore` is the store's API: every call goes to the
 * store's server. Remember adoptions you placed in `moss.adoptions` so you can tell the visitor later.
 */
export class Moss extends Parent {
  /** The pet store's API. */
  petstore!: PetStore;
  /** Orders you placed: pet name and order id. */
  adoptions: Array<{ pet: string; orderId: number }> = [];
}
