import { createHash } from "node:crypto";
import { MossError } from "../errors.ts";

const TENANT = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Bearer tokens of the tenants, kept as SHA-256 hashes of their secrets (never the secrets themselves). */
export class TenantTokens {
  readonly #tenantsByHash = new Map<string, string>();
  /** The secrets themselves, only for the redactor of what tenants read (see `TenantView`). */
  readonly #secrets: string[] = [];

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
      tokens.add(tenant, secret, source);
    }
    return tokens;
  }

  /** Adds a tenant's secret; a secret another tenant has already is refused (it would open only one of them). */
  add(tenant: string, secret: string, source = "TenantTokens.add"): void {
    const holder = this.#tenantsByHash.get(hash(secret));
    if (holder !== undefined && holder !== tenant) throw sharedSecret(holder, tenant, source);
    this.#tenantsByHash.set(hash(secret), tenant);
    this.#secrets.push(secret);
  }

  /** Every tenant's secret: what a tenant reads is redacted of all of them. */
  secrets(): readonly string[] {
    return this.#secrets;
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

/** Two tenants given one secret: the token would name one of them only, so the server does not start. */
function sharedSecret(first: string, second: string, source: string): MossError {
  return new MossError(
    "invalid-argument",
    `${source}: tenants "${first}" and "${second}" have the same secret; a bearer token names one tenant, so give each its own secret.`,
    { source, tenants: [first, second] },
  );
}

function hash(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}
