import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** The pet store API of plugin/openapi.yaml, in memory, on 127.0.0.1; every route checks `X-Api-Key`. */
export async function startPetStore(
  apiKey: string,
): Promise<{ url: string; orders: unknown[]; close(): Promise<void> }> {
  const pets = [
    { id: 1, name: "Rex", tag: "dog", status: "available" },
    { id: 2, name: "Tom", tag: "cat", status: "available" },
    { id: 3, name: "Bello", tag: "dog", status: "sold" },
    { id: 4, name: "Lassie", tag: "dog", status: "available" },
  ];
  const orders: Array<{ id: number; petId: number; customer: string }> = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const send = (status: number, value: unknown) =>
        response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
      if (request.headers["x-api-key"] !== apiKey)
        return send(401, { message: "wrong or missing X-Api-Key" });
      const url = new URL(request.url ?? "/", "http://127.0.0.1");
      const body = Buffer.concat(chunks).toString();
      const route = `${request.method} ${url.pathname}`;
      if (route === "GET /api/pets") {
        const tag = url.searchParams.get("tag");
        const status = url.searchParams.get("status");
        return send(
          200,
          pets.filter((pet) => (!tag || pet.tag === tag) && (!status || pet.status === status)),
        );
      }
      if (route === "POST /api/pets") {
        const input = JSON.parse(body) as { name: string; tag: string };
        const pet = { id: pets.length + 1, name: input.name, tag: input.tag, status: "available" };
        pets.push(pet);
        return send(201, pet);
      }
      const one = /^\/api\/pets\/(\d+)$/.exec(url.pathname);
      if (one && request.method === "GET") {
        const pet = pets.find((candidate) => candidate.id === Number(one[1]));
        return pet ? send(200, pet) : send(404, { message: `no pet ${one[1]}` });
      }
      if (route === "POST /api/orders") {
        const form = new URLSearchParams(body);
        const pet = pets.find((candidate) => candidate.id === Number(form.get("petId")));
        if (!pet) return send(404, { message: `no pet ${form.get("petId")}` });
        if (pet.status !== "available") return send(409, { message: `${pet.name} is ${pet.status}` });
        pet.status = "pending";
        const order = { id: orders.length + 1, petId: pet.id, customer: form.get("customer") ?? "" };
        orders.push(order);
        return send(200, order);
      }
      send(404, { message: `no route ${route}` });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/api`,
    orders,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
