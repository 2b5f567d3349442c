import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** How the pet server checks credentials. */
export type PetAuth =
  | { kind: "header"; name: string; value: string }
  | { kind: "query"; name: string; value: string }
  | { kind: "cookie"; name: string; value: string }
  | { kind: "bearer"; value: string }
  | { kind: "basic"; username: string; password: string }
  | { kind: "none" };

/** One request the server saw. */
export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  rawHeaders: string[];
  body: Buffer;
}

/** A running pet server on 127.0.0.1. */
export interface PetServer {
  url: string;
  origin: string;
  requests: SeenRequest[];
  /** Token requests to `/oauth/token`. */
  tokenRequests: number;
  close(): Promise<void>;
}

interface Pet {
  id: number;
  name: string;
  tag?: string;
  status: string;
}

/**
 * The API of `fixtures/pets/openapi.yaml` under `/v1`, with `auth` checked on every route but `/oauth/token`.
 * `/v1/moved?to=` redirects to `to`; `/v1/whoami` echoes the request headers; `/v1/huge` sends 2 MiB.
 */
export async function startPetServer(
  auth: PetAuth,
  options: { oauthClient?: { id: string; secret: string } } = {},
): Promise<PetServer> {
  const pets: Pet[] = [
    { id: 1, name: "Rex", tag: "dog", status: "available" },
    { id: 2, name: "Tom", tag: "cat", status: "adopted" },
    { id: 3, name: "Bello", tag: "dog", status: "available" },
  ];
  let nextId = 4;
  const state = { requests: [] as SeenRequest[], tokenRequests: 0 };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks);
      state.requests.push({
        method: request.method ?? "",
        url: request.url ?? "",
        headers: request.headers,
        rawHeaders: request.rawHeaders,
        body,
      });
      void handle(request, response, body).catch((error: unknown) =>
        send(response, 500, { message: String(error) }),
      );
    });
  });

  async function handle(request: IncomingMessage, response: ServerResponse, body: Buffer): Promise<void> {
    const url = new URL(request.url ?? "/", "http://127.0.0.1");
    const route = `${request.method} ${url.pathname}`;
    if (route === "POST /oauth/token") {
      state.tokenRequests++;
      const client = options.oauthClient;
      const expected = client
        ? `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString("base64")}`
        : "";
      const form = new URLSearchParams(body.toString());
      if (
        !client ||
        request.headers.authorization !== expected ||
        form.get("grant_type") !== "client_credentials"
      )
        return send(response, 401, { error: "invalid_client" });
      return send(response, 200, { access_token: "issued-token-42", token_type: "bearer", expires_in: 3600 });
    }
    if (!authorized(request, url)) return send(response, 401, { message: "missing or wrong credentials" });
    if (route === "GET /v1/pets") {
      const limit = Number(url.searchParams.get("limit") ?? 20);
      const tag = url.searchParams.get("tag");
      return send(response, 200, pets.filter((pet) => !tag || pet.tag === tag).slice(0, limit));
    }
    if (route === "POST /v1/pets") {
      if (!String(request.headers["content-type"]).startsWith("application/json"))
        return send(response, 415, { message: "JSON only" });
      const input = JSON.parse(body.toString()) as { name?: unknown; tag?: string };
      if (typeof input.name !== "string") return send(response, 400, { message: "name is required" });
      const pet: Pet = {
        id: nextId++,
        name: input.name,
        status: "available",
        ...(input.tag ? { tag: input.tag } : {}),
      };
      pets.push(pet);
      return send(response, 201, pet);
    }
    const one = /^\/v1\/pets\/(\d+)$/.exec(url.pathname);
    if (one?.[1] === "424242") {
      return send(response, 500, { message: "debug dump", "x-api-key": request.headers["x-api-key"] });
    }
    if (one) {
      const index = pets.findIndex((pet) => pet.id === Number(one[1]));
      if (index === -1) return send(response, 404, { message: `no pet ${one[1]}` });
      if (request.method === "DELETE") {
        pets.splice(index, 1);
        response.writeHead(204).end();
        return;
      }
      return send(response, 200, pets[index]);
    }
    const photo = /^\/v1\/pets\/(\d+)\/photo$/.exec(url.pathname);
    if (photo && request.method === "POST") {
      const form = await new Request("http://x", {
        method: "POST",
        headers: { "content-type": String(request.headers["content-type"]) },
        body,
      }).formData();
      const file = form.get("file");
      const caption = form.get("caption");
      const bytes = file instanceof Blob ? file.size : -1;
      return send(response, 200, { bytes, caption: typeof caption === "string" ? caption : null });
    }
    if (route === "POST /v1/adoptions") {
      if (request.headers["content-type"] !== "application/x-www-form-urlencoded")
        return send(response, 415, { message: "form only" });
      const form = new URLSearchParams(body.toString());
      const petId = Number(form.get("petId"));
      const pet = pets.find((candidate) => candidate.id === petId);
      if (pet?.status !== "available")
        return send(response, 200, {
          state: "refused",
          reason: `${form.get("name")} cannot adopt pet ${petId}`,
        });
      pet.status = "pending";
      return send(response, 200, { state: "accepted", petId });
    }
    if (route === "GET /v1/whoami")
      return send(response, 200, { headers: request.headers, url: request.url });
    if (route === "GET /v1/moved") {
      response.writeHead(302, { location: url.searchParams.get("to") ?? "/" }).end();
      return;
    }
    if (route === "GET /v1/huge") {
      response.writeHead(200, { "content-type": "text/plain" });
      response.end("x".repeat(2 * 1024 * 1024));
      return;
    }
    send(response, 404, { message: `no route ${route}` });
  }

  function authorized(request: IncomingMessage, url: URL): boolean {
    switch (auth.kind) {
      case "none":
        return true;
      case "header":
        return request.headers[auth.name.toLowerCase()] === auth.value;
      case "query":
        return url.searchParams.get(auth.name) === auth.value;
      case "cookie":
        return (request.headers.cookie ?? "")
          .split(/;\s*/)
          .includes(`${auth.name}=${encodeURIComponent(auth.value)}`);
      case "bearer":
        return request.headers.authorization === `Bearer ${auth.value}`;
      case "basic":
        return (
          request.headers.authorization ===
          `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString("base64")}`
        );
    }
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: `${origin}/v1`,
    origin,
    get requests() {
      return state.requests;
    },
    get tokenRequests() {
      return state.tokenRequests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function send(response: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  response.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  response.end(text);
}
