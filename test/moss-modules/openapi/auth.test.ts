import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { parse } from "yaml";
import { type OpenApiDocument, openApiService } from "../../../moss-modules/openapi/index.ts";
import { type PetAuth, type PetServer, startPetServer } from "./pet-server.ts";
import { petsWorkspace } from "./plugin-workspace.ts";

const PETS_DOCUMENT = fileURLToPath(new URL("./fixtures/pets/openapi.yaml", import.meta.url));
const SECRET = "s3cret-value-0042";
const servers: PetServer[] = [];
const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function serve(auth: PetAuth, options: Parameters<typeof startPetServer>[1] = {}): Promise<PetServer> {
  const server = await startPetServer(auth, options);
  servers.push(server);
  return server;
}

/** The pets plugin with `plugin.json` `auth`, as a host service (no runtime: these tests are about the wire). */
async function pluginService(auth: object | undefined, options: Parameters<typeof openApiService>[2] = {}) {
  const workspace = await petsWorkspace({
    id: "pets",
    name: "Pets",
    description: "Pets.",
    ...(auth ? { auth } : {}),
  });
  cleanups.push(workspace.cleanup);
  const binding = await openApiService("PetShelter", workspace.plugin, options);
  return binding.service as Record<string, (args?: unknown) => Promise<unknown>>;
}

/** The bare pets document with `securitySchemes` and a global `security`, as a host service. */
async function documentService(
  schemes: Record<string, object>,
  security: Array<Record<string, string[]>>,
  options: Parameters<typeof openApiService>[2],
) {
  const document = parse(await readFile(PETS_DOCUMENT, "utf8")) as OpenApiDocument;
  (document.components as Record<string, unknown>).securitySchemes = schemes;
  document.security = security;
  const binding = await openApiService("PetShelter", document, options);
  return binding.service as Record<string, (args?: unknown) => Promise<unknown>>;
}

describe("plugin.json auth", () => {
  test("header auth reads its value from the environment variable plugin.json names", async () => {
    const server = await serve({ kind: "header", name: "X-Api-Key", value: SECRET });
    process.env.PETS_TEST_KEY = SECRET;
    try {
      const service = await pluginService(
        // biome-ignore lint/suspicious/noTemplateCurlyInString: plugin.json's own ${ENV} syntax
        { type: "header", args: { "X-Api-Key": "${PETS_TEST_KEY}" } },
        { serverUrl: server.url },
      );
      expect(await service.getPet!({ petId: 1 })).toMatchObject({ name: "Rex" });
    } finally {
      delete process.env.PETS_TEST_KEY;
    }
  });

  test("a missing environment variable fails the bind, naming the credential and where it is read from; no request is sent", async () => {
    const server = await serve({ kind: "none" });
    const bound = pluginService(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: plugin.json's own ${ENV} syntax
      { type: "header", args: { "X-Api-Key": "${PETS_UNSET_KEY}" } },
      { serverUrl: server.url },
    );
    await expect(bound).rejects.toMatchObject({
      code: "credential-missing",
      message:
        'credential "X-Api-Key" is missing: the environment variable PETS_UNSET_KEY is not set (read from plugin.json auth.args["X-Api-Key"])',
    });
    expect(server.requests).toHaveLength(0);
  });

  test("param auth goes into the query, with the binding's credential winning over plugin.json", async () => {
    const server = await serve({ kind: "query", name: "api_key", value: SECRET });
    const service = await pluginService(
      { type: "param", args: { api_key: "placeholder" } },
      { serverUrl: server.url, credentials: { api_key: SECRET } },
    );
    expect(await service.listPets!({ tag: "cat" })).toEqual([
      { id: 2, name: "Tom", tag: "cat", status: "adopted" },
    ]);
    expect(server.requests[0]!.url).toBe(`/v1/pets?tag=cat&api_key=${SECRET}`);
  });

  test("cookie auth sends the value as a cookie", async () => {
    const server = await serve({ kind: "cookie", name: "session", value: "a b;c" });
    const service = await pluginService(
      { type: "cookie", args: { session: "a b;c" } },
      { serverUrl: server.url },
    );
    expect(await service.getPet!({ petId: 3 })).toMatchObject({ name: "Bello" });
    expect(server.requests[0]!.headers.cookie).toBe("session=a%20b%3Bc");
  });

  test("oidc auth asks the host's token provider for a bearer token on every call", async () => {
    const server = await serve({ kind: "bearer", value: SECRET });
    let asked = 0;
    const service = await pluginService(
      { type: "oidc", args: {} },
      {
        serverUrl: server.url,
        token: () => {
          asked++;
          return SECRET;
        },
      },
    );
    await service.getPet!({ petId: 1 });
    await service.getPet!({ petId: 2 });
    expect(asked).toBe(2);
  });
});

describe("securitySchemes", () => {
  test.each([
    [
      "header",
      { type: "apiKey", in: "header", name: "X-Key" },
      { kind: "header", name: "X-Key", value: SECRET },
    ],
    ["query", { type: "apiKey", in: "query", name: "key" }, { kind: "query", name: "key", value: SECRET }],
    ["cookie", { type: "apiKey", in: "cookie", name: "sid" }, { kind: "cookie", name: "sid", value: SECRET }],
    ["bearer", { type: "http", scheme: "bearer" }, { kind: "bearer", value: SECRET }],
  ] as const)(
    "apiKey/http %s with the credential from a named environment variable",
    async (_, scheme, auth) => {
      const server = await serve(auth as PetAuth);
      process.env.PETS_SCHEME_SECRET = SECRET;
      try {
        const service = await documentService({ main: scheme }, [{ main: [] }], {
          serverUrl: server.url,
          credentials: { main: { env: "PETS_SCHEME_SECRET" } },
        });
        expect(await service.getPet!({ petId: 1 })).toMatchObject({ name: "Rex" });
      } finally {
        delete process.env.PETS_SCHEME_SECRET;
      }
    },
  );

  test("http basic with username and password", async () => {
    const server = await serve({ kind: "basic", username: "ada", password: SECRET });
    const service = await documentService({ basic: { type: "http", scheme: "basic" } }, [{ basic: [] }], {
      serverUrl: server.url,
      credentials: { basic: { username: "ada", password: SECRET } },
    });
    expect(await service.getPet!({ petId: 2 })).toMatchObject({ name: "Tom" });
  });

  test("oauth2 client credentials: one token request, the token cached for later calls", async () => {
    const server = await serve(
      { kind: "bearer", value: "issued-token-42" },
      { oauthClient: { id: "client-1", secret: SECRET } },
    );
    const scheme = {
      type: "oauth2",
      flows: {
        clientCredentials: { tokenUrl: `${server.origin}/oauth/token`, scopes: { "pets:read": "read pets" } },
      },
    };
    const service = await documentService({ oauth: scheme }, [{ oauth: ["pets:read"] }], {
      serverUrl: server.url,
      credentials: { oauth: { clientId: "client-1", clientSecret: SECRET } },
    });
    await service.getPet!({ petId: 1 });
    await service.listPets!();
    expect(server.tokenRequests).toBe(1);
    const tokenRequest = server.requests.find((request) => request.url === "/oauth/token")!;
    expect(new URLSearchParams(tokenRequest.body.toString()).get("scope")).toBe("pets:read");
  });

  test("without credentials for any alternative the call goes out unauthenticated and fails as HttpError 401", async () => {
    const server = await serve({ kind: "bearer", value: SECRET });
    const service = await documentService({ main: { type: "http", scheme: "bearer" } }, [{ main: [] }], {
      serverUrl: server.url,
    });
    await expect(service.getPet!({ petId: 1 })).rejects.toMatchObject({ name: "HttpError", status: 401 });
  });
});

let shared: PetServer | undefined;
beforeAll(async () => {
  shared = await startPetServer({ kind: "none" });
});
afterAll(async () => {
  await shared?.close();
});

describe("server selection", () => {
  test("servers[0] variables are filled from the binding", async () => {
    const port = new URL(shared!.origin).port;
    const document = parse(await readFile(PETS_DOCUMENT, "utf8")) as OpenApiDocument;
    const binding = await openApiService("PetShelter", document, { serverVariables: { port } });
    const service = binding.service as Record<string, (args?: unknown) => Promise<unknown>>;
    expect(await service.getPet!({ petId: 1 })).toMatchObject({ name: "Rex" });
  });
});
