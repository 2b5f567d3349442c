import { createHash } from "node:crypto";
import { MossError } from "../errors.ts";

const TENANT = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Bearer tokens of the tenants, kept as SHA-256 hashes of their secrets (never the secrets themselves). */
export class TenantTokens {
  readonly #tenantsByHash = new Map<string, string>();

  /** Reads `tenant:secret` entries (from `--token` flags, `MOSS_SERVE_TOKENS` or the config); `source` names them in errors. */
  static parse(entries: Iterable<string>, source: string): TenantTokens {
    const tokens = new TenantTokens();
    for (const entry of entries) {
      const colon = entry.indexOf(":");
      const tenant = colon < 0 ? "" : entry.slice(0, colon).trim();
      const secret = colon < 0 ? "" : entry.slice(colon + 1).trim();
      if (!TENANT.test(tenant) || secret === "") {
        throw new MossError(
          "invalid-argument",
          `${source}: a token is "<tenant>:<secret>" (tenant: letters, digits, _ . -; a non-empty secret), got "${colon < 0 ? entry : `${entry.slice(0, colon)}:…`}".`,
          { source },
        );
      }
      tokens.add(tenant, secret);
    }
    return tokens;
  }

  /** Splits `MOSS_SERVE_TOKENS` ("a:s1,b:s2") into entries. */
  static splitList(list: string | undefined): string[] {
    return (list ?? "")
      .split(",")
      .map((entry) => entry.trim())
      .filter((entry) => entry !== "");
  }

  add(tenant: string, secret: string): void {
    this.#tenantsByHash.set(hash(secret), tenant);
  }

  get size(): number {
    return this.#tenantsByHash.size;
  }

  /** The tenant of an `Authorization` header, or undefined when it carries no known bearer token. */
  tenantOf(authorization: string | undefined): string | undefined {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    return match === null ? undefined : this.#tenantsByHash.get(hash(match[1]!));
  }
}

function hash(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}
