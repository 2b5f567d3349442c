import { MossError } from "../../engine/errors.ts";
import type { SecretRedactor } from "../redact-secrets.ts";
import type { ApiOperation } from "./api-model.ts";
import type { OpenApiDocument } from "./load-document.ts";
import type { PluginAuth } from "./plugin-manifest.ts";

/** A secret given by the host: the value itself, an environment variable to read it from, or a function. */
export type Secret = string | { env: string } | (() => string | Promise<string>);

/**
 * Credentials for one security scheme (by its name in `components.securitySchemes`) or one `plugin.json` auth
 * argument (by its name): an API key or bearer token as a `Secret`, `{ username, password }` for http basic,
 * `{ clientId, clientSecret, scopes? }` for OAuth2 client credentials.
 */
export type Credential =
  | Secret
  | { username: Secret; password: Secret }
  | { clientId: Secret; clientSecret: Secret; scopes?: string[] };

/** Where credentials go on one request; built on the host, never shown to model code. */
export interface AuthTarget {
  headers: Headers;
  query: URLSearchParams;
  cookies: Map<string, string>;
}

interface CachedToken {
  token: string;
  expiresAt: number;
}

/** Options of an `Authenticator`. */
export interface AuthenticatorOptions {
  document: OpenApiDocument;
  pluginAuth?: PluginAuth;
  credentials?: Record<string, Credential>;
  /** Bearer token provider: used for `plugin.json` `oidc` auth and for http bearer schemes without a credential. */
  token?: Secret;
  secrets: SecretRedactor;
  /** Requests the OAuth2 token endpoint (the client's fetch with its limits). */
  fetchToken: (url: string, init: RequestInit) => Promise<Response>;
}

/** Applies `plugin.json` auth and the operation's security requirements to a request. */
export class Authenticator {
  readonly #options: AuthenticatorOptions;
  readonly #tokens = new Map<string, CachedToken>();
  readonly #pending = new Map<string, Promise<CachedToken>>();

  constructor(options: AuthenticatorOptions) {
    this.#options = options;
  }

  /**
   * Reads every credential given as an environment variable (in `credentials` or a `plugin.json` `${NAME}`), and
   * registers each secret already known, so that a missing one fails the bind with a `MossError`
   * (`credential-missing`) that names the credential and where it is read from.
   */
  checkCredentials(): void {
    const pluginAuth = this.#options.pluginAuth;
    if (pluginAuth?.type === "oidc" && this.#options.token === undefined)
      throw new MossError(
        "credential-missing",
        'credential missing: this plugin uses "oidc" auth (plugin.json auth.type): bind it with the option token',
        { credential: "token" },
      );
    if (pluginAuth && pluginAuth.type !== "oidc") {
      for (const [name, written] of Object.entries(pluginAuth.args)) {
        const given = this.#options.credentials?.[name];
        if (given !== undefined) this.#check(given, `credentials[${JSON.stringify(name)}]`, name);
        else this.#check(fromTemplate(written), `plugin.json auth.args[${JSON.stringify(name)}]`, name);
      }
    }
    for (const [name, given] of Object.entries(this.#options.credentials ?? {})) {
      if (pluginAuth && pluginAuth.type !== "oidc" && name in pluginAuth.args) continue;
      this.#check(given, `credentials[${JSON.stringify(name)}]`, name);
    }
    if (this.#options.token !== undefined) this.#check(this.#options.token, "token", "token");
  }

  #check(credential: Credential, where: string, name: string): void {
    const parts: Array<[Secret, string]> =
      typeof credential === "object" && credential !== null && "username" in credential
        ? [
            [credential.username, `${where}.username`],
            [credential.password, `${where}.password`],
          ]
        : typeof credential === "object" && credential !== null && "clientId" in credential
          ? [
              [credential.clientId, `${where}.clientId`],
              [credential.clientSecret, `${where}.clientSecret`],
            ]
          : [[credential as Secret, where]];
    for (const [secret, at] of parts) {
      if (typeof secret === "string") this.#options.secrets.add(secret);
      else if (typeof secret === "function") continue;
      else if (secret && typeof secret === "object" && typeof secret.env === "string") {
        const found = process.env[secret.env];
        if (found === undefined || found === "")
          throw new MossError(
            "credential-missing",
            `credential "${name}" is missing: the environment variable ${secret.env} is not set (read from ${at})`,
            { credential: name, env: secret.env, where: at },
          );
        this.#options.secrets.add(found);
      } else
        throw new MossError(
          "credential-missing",
          `credential "${name}" (${at}) must be a string, { env: NAME } or a function`,
          { credential: name, where: at },
        );
    }
  }

  async apply(operation: ApiOperation, target: AuthTarget): Promise<void> {
    const pluginAuth = this.#options.pluginAuth;
    if (pluginAuth) await this.#applyPluginAuth(pluginAuth, target);
    const schemes = securitySchemes(this.#options.document);
    const alternative = operation.security.find((requirement) =>
      Object.keys(requirement).every((name) => this.#available(name, schemes[name])),
    );
    for (const [name, scopes] of Object.entries(alternative ?? {})) {
      await this.#applyScheme(name, schemes[name]!, scopes, target);
    }
  }

  async #applyPluginAuth(auth: PluginAuth, target: AuthTarget): Promise<void> {
    if (auth.type === "oidc") {
      const token = this.#options.token;
      if (token === undefined)
        throw new Error('this plugin uses "oidc" auth: the host must bind a token provider');
      target.headers.set("authorization", `Bearer ${await this.#secret(token)}`);
      return;
    }
    for (const [name, written] of Object.entries(auth.args)) {
      const given = this.#options.credentials?.[name];
      const value = await this.#secret(given !== undefined ? (given as Secret) : fromTemplate(written));
      if (auth.type === "header") target.headers.set(name, value);
      else if (auth.type === "param") target.query.set(name, value);
      else target.cookies.set(name, value);
    }
  }

  #available(name: string, scheme: Record<string, unknown> | undefined): boolean {
    if (!scheme) return false;
    if (this.#options.credentials?.[name] !== undefined) return true;
    const bearer = scheme.type === "http" && String(scheme.scheme).toLowerCase() === "bearer";
    return (bearer || scheme.type === "openIdConnect") && this.#options.token !== undefined;
  }

  async #applyScheme(
    name: string,
    scheme: Record<string, unknown>,
    scopes: string[],
    target: AuthTarget,
  ): Promise<void> {
    const credential = this.#options.credentials?.[name] ?? this.#options.token!;
    switch (scheme.type) {
      case "apiKey": {
        const value = await this.#secret(credential as Secret);
        const key = String(scheme.name);
        if (scheme.in === "header") target.headers.set(key, value);
        else if (scheme.in === "query") target.query.set(key, value);
        else if (scheme.in === "cookie") target.cookies.set(key, value);
        return;
      }
      case "http": {
        const kind = String(scheme.scheme).toLowerCase();
        if (kind === "basic") {
          const pair =
            typeof credential === "object" && "username" in credential
              ? `${await this.#secret(credential.username)}:${await this.#secret(credential.password)}`
              : await this.#secret(credential as Secret);
          this.#options.secrets.add(pair);
          target.headers.set("authorization", `Basic ${Buffer.from(pair).toString("base64")}`);
        } else {
          target.headers.set(
            "authorization",
            `${kind === "bearer" ? "Bearer" : String(scheme.scheme)} ${await this.#secret(credential as Secret)}`,
          );
        }
        return;
      }
      case "oauth2":
      case "openIdConnect": {
        const token =
          typeof credential === "object" && "clientId" in credential
            ? await this.#clientCredentialsToken(name, scheme, credential, scopes)
            : await this.#secret(credential as Secret);
        target.headers.set("authorization", `Bearer ${token}`);
        return;
      }
      default:
        throw new Error(`security scheme "${name}" has unsupported type ${JSON.stringify(scheme.type)}`);
    }
  }

  async #clientCredentialsToken(
    name: string,
    scheme: Record<string, unknown>,
    credential: { clientId: Secret; clientSecret: Secret; scopes?: string[] },
    scopes: string[],
  ): Promise<string> {
    const cached = this.#tokens.get(name);
    if (cached && cached.expiresAt > Date.now()) return cached.token;
    let pending = this.#pending.get(name);
    if (!pending) {
      pending = this.#requestToken(name, scheme, credential, scopes).finally(() =>
        this.#pending.delete(name),
      );
      this.#pending.set(name, pending);
    }
    const token = await pending;
    this.#tokens.set(name, token);
    return token.token;
  }

  async #requestToken(
    name: string,
    scheme: Record<string, unknown>,
    credential: { clientId: Secret; clientSecret: Secret; scopes?: string[] },
    scopes: string[],
  ): Promise<CachedToken> {
    const flow = (scheme.flows as { clientCredentials?: { tokenUrl?: unknown } } | undefined)
      ?.clientCredentials;
    if (typeof flow?.tokenUrl !== "string")
      throw new Error(`security scheme "${name}" has no clientCredentials flow with a tokenUrl`);
    const clientId = await this.#secret(credential.clientId);
    const clientSecret = await this.#secret(credential.clientSecret);
    const body = new URLSearchParams({ grant_type: "client_credentials" });
    const wanted = credential.scopes ?? scopes;
    if (wanted.length > 0) body.set("scope", wanted.join(" "));
    const pair = this.#options.secrets.add(
      `${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`,
    );
    const basic = Buffer.from(pair).toString("base64");
    const response = await this.#options.fetchToken(flow.tokenUrl, {
      method: "POST",
      headers: {
        authorization: `Basic ${basic}`,
        "content-type": "application/x-www-form-urlencoded",
        accept: "application/json",
      },
      body,
    });
    const text = await response.text();
    if (!response.ok)
      throw new Error(`the token endpoint of security scheme "${name}" answered HTTP ${response.status}`);
    let parsed: { access_token?: unknown; expires_in?: unknown };
    try {
      parsed = JSON.parse(text) as typeof parsed;
    } catch {
      throw new Error(`the token endpoint of security scheme "${name}" did not answer JSON`);
    }
    if (typeof parsed.access_token !== "string")
      throw new Error(`the token endpoint of security scheme "${name}" answered without an access_token`);
    const lifetimeSeconds = typeof parsed.expires_in === "number" ? parsed.expires_in : 300;
    return {
      token: this.#options.secrets.add(parsed.access_token),
      expiresAt: Date.now() + Math.max(0, lifetimeSeconds - 30) * 1000,
    };
  }

  async #secret(secret: Secret): Promise<string> {
    let value: string;
    if (typeof secret === "string") value = secret;
    else if (typeof secret === "function") value = String(await secret());
    else if (secret && typeof secret === "object" && typeof secret.env === "string") {
      const found = process.env[secret.env];
      if (found === undefined)
        throw new Error(`environment variable ${secret.env} (a credential) is not set`);
      value = found;
    } else throw new Error("a credential must be a string, { env: NAME } or a function");
    if (/[\r\n\0]/.test(value)) throw new Error("a credential contains a line break or NUL");
    return this.#options.secrets.add(value);
  }
}

/** `${NAME}` in plugin.json reads the environment variable NAME; anything else is the value itself. */
function fromTemplate(written: string): Secret {
  const match = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(written);
  return match ? { env: match[1]! } : written;
}

function securitySchemes(document: OpenApiDocument): Record<string, Record<string, unknown>> {
  const components = document.components as
    | { securitySchemes?: Record<string, Record<string, unknown>> }
    | undefined;
  return components?.securitySchemes ?? {};
}
