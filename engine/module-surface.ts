// What a context module's code sees of "moss-ts" when moss-ts reads and checks it: the base class and the
// service lifecycle, without the engine's own declarations (ts-morph, openai, isolated-vm), which would make
// every analysis and type-check program parse megabytes of .d.ts the model's code never uses.
export { type Injection, type InjectionRuntime, Moss } from "./moss.ts";
export type { MossContext } from "./types.ts";
