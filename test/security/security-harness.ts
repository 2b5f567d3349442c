import { existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import type { ExecuteRequest, Execution, ExecutionLimits, TypeCheckMode } from "../../engine/types.ts";
import { VAULT_FILE, Vault, vaultProbe } from "../fixtures/security/vault.ts";

/** The context module every attempt runs against. */
export const SECURITY_MODULE = "test/fixtures/security/context.ts";

/** A file an escaped payload would create on the host. */
export const CANARY_FILE = path.join(tmpdir(), `moss-security-canary-${process.pid}`);

/** The value of the host-global canary while nothing has escaped. */
export const CANARY_VALUE = "intact";

/** Small limits so the battery stays fast; attempts override one where they need to. */
export const LIMITS: ExecutionLimits = {
  wallTimeMs: 2_000,
  cpuTimeMs: 1_500,
  memoryLimitBytes: 32 * 1024 * 1024,
  maxStdoutBytes: 4_096,
  maxHostCalls: 200,
  maxResultBytes: 64 * 1024,
};

/**
 * Model code helper: given something that might be a host `Function`, tries to reach the host realm, set the host
 * canary and write the canary file. Returns `typeof process` in the realm it reached, or `blocked: <error>`.
 */
export function breachHelper(): string {
  return `
function breach(F: any): string {
  try {
    const realm = F("return globalThis")();
    realm.mossSecurityCanary = "breached";
    const fs = realm.process?.getBuiltinModule?.("node:fs");
    if (fs) fs.writeFileSync(${JSON.stringify(CANARY_FILE)}, "breached");
    return typeof realm.process;
  } catch (error) {
    return "blocked: " + (error as Error).name;
  }
}
`;
}

/** Model code that must work after every attempt: a visible function, a sync host call and a property read. */
export const HEALTHY_MAIN = `async function main(moss: Moss) {
  return [double(21), moss.vault.read("k"), moss.vault.label, await moss.vault.fetch("f")];
}`;

export const HEALTHY_RETURNS = [42, "value of k", "vault", "fetched f"];

/** One runtime over the security fixture, with its own vault, for one driver. */
export class SecurityRig {
  readonly vault = new Vault();
  runtime!: MossRuntime;
  readonly #driver: "process" | "in-process";
  #objectPrototypeNames: string[] = [];

  constructor(driver: "process" | "in-process") {
    this.#driver = driver;
  }

  async open(): Promise<this> {
    (globalThis as Record<string, unknown>).mossSecurityCanary = CANARY_VALUE;
    rmSync(CANARY_FILE, { force: true });
    this.#objectPrototypeNames = Object.getOwnPropertyNames(Object.prototype).sort();
    this.runtime = await new MossCompiler({ sandbox: this.#driver, limits: LIMITS })
      .bind(Vault, this.vault)
      .compile(SECURITY_MODULE);
    return this;
  }

  /** Runs model code with type-checking off (so the attempt reaches the sandbox) unless told otherwise. */
  run(
    code: string,
    options: Omit<ExecuteRequest, "code"> & { typeCheck?: TypeCheckMode } = {},
  ): Promise<Execution> {
    return this.runtime.execute({ typeCheck: "off", ...options, code });
  }

  /** Asserts that nothing on the host changed and that the runtime still runs a trivial `main` correctly. */
  async expectHostUnchanged(): Promise<void> {
    expect((globalThis as Record<string, unknown>).mossSecurityCanary).toBe(CANARY_VALUE);
    expect(existsSync(CANARY_FILE)).toBe(false);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(([] as unknown as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(this.#objectPrototypeNames);
    expect(this.vault.intact()).toBe(true);
    expect(vaultProbe.internalCalls).toBe(0);
    expect(vaultProbe.hiddenCalls).toBe(0);
    expect(vaultProbe.destroyed.has(this.vault)).toBe(false);
    expect(this.runtime.mossInjections().vault).toBe(this.vault);
    expect(process.kill(process.pid, 0)).toBe(true);
    const healthy = await this.run(HEALTHY_MAIN);
    expect(healthy.error).toBeUndefined();
    expect(healthy.ok).toBe(true);
    expect(healthy.returns).toEqual(HEALTHY_RETURNS);
  }

  async close(): Promise<void> {
    await this.runtime?.close();
  }
}

/** Absolute host paths that must never appear in anything the model or the caller sees from model code. */
export const HOST_PATHS: readonly string[] = [
  process.cwd(),
  path.dirname(VAULT_FILE),
  "node_modules",
  "file://",
];
