import { Moss as Parent } from "moss-ts";

/** You greet people and remember whom you greeted. */
export class Moss extends Parent {
  greeted: string[] = [];
}

/** Says hello to `name`. */
export function hello(name: string): string {
  return `hello, ${name}`;
}
