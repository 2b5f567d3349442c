// The IoC facade of moss-ts over inversify: every export is named here.
export { type Bootstrapper, Container, type ContainerOptions } from "./container.ts";
export { destroyOnce, hasOnDestroy } from "./destroy-once.ts";
export { type Provider, provide } from "./provider.ts";
export { type Token, tokenName } from "./token.ts";
