import { execFileSync } from "node:child_process";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";
import { bindMcp } from "../../moss-modules/mcp/index.ts";
import { bindOpenApi, type OpenApiDocument, openApiService } from "../../moss-modules/openapi/index.ts";
import { startNotesServer } from "../moss-modules/mcp/notes-server.ts";
import { compileServices, HOSTILE_MCP_SERVER, scratchFolder } from "./upstream-rig.ts";

// Credentials never reach model code: upstreams that echo what the host sent them, in the spellings real servers
// use, hand model code "[redacted]" and nothing that decodes to a secret.

/** The API key (from an environment variable), the query key, the cookie, and basic auth's user and password. */
const HEADER_KEY = "hk_live/Abc+def=ghi~jkl.0042";
const QUERY_KEY = "qk-5f3a9c2e7b1d4e6f";
const COOKIE_KEY = "ck_<session>&'7f2b9e'";
const USERNAME = "robot-user-0042";
const PASSWORD = "pa ss/w0rd+<&>'*!~";
const SECRETS = [HEADER_KEY, QUERY_KEY, COOKIE_KEY, PASSWORD, `${USERNAME}:${PASSWORD}`];
const HEADER_KEY_VARIABLE = "MOSS_ATTACK_HEADER_KEY";

/**
 * Every view of `text` that a standard decoder gives model code (or a person reading what it returned): the text,
 * percent- and form-decoded (also twice), JSON-unescaped, character references resolved, base64/base64url/hex runs
 * decoded, and bytes read as UTF-8 and UTF-16.
 */
function decodedViews(text: string, depth = 0): string[] {
  const views = new Set<string>([text]);
  const attempts: Array<() => string> = [
    () => decodeURIComponent(text),
    () => decodeURIComponent(text.replace(/\+/g, " ")),
    () => decodeURIComponent(decodeURIComponent(text)),
    () => [...new URLSearchParams(text).values()].join(" "),
    () => JSON.parse(`"${text.replace(/"/g, '\\"')}"`) as string,
    () =>
      text
        .replace(/&#x([0-9a-f]+);?/gi, (_, hex: string) => String.fromCodePoint(Number.parseInt(hex, 16)))
        .replace(/&#([0-9]+);?/g, (_, decimal: string) => String.fromCodePoint(Number(decimal)))
        .replace(/&lt;/g, "<")
        .replace(/&gt;/g, ">")
        .replace(/&quot;/g, '"')
        .replace(/&apos;/g, "'")
        .replace(/&amp;/g, "&"),
    () => Buffer.from(text, "latin1").toString("utf16le"),
  ];
  for (const attempt of attempts) {
    try {
      views.add(attempt());
    } catch {}
  }
  for (const run of text.match(/[A-Za-z0-9+/_-]{8,}={0,2}/g) ?? []) {
    for (let offset = 0; offset < 4; offset++)
      views.add(Buffer.from(run.slice(offset), "base64").toString("latin1"));
    if (/^[0-9a-f]+$/i.test(run)) views.add(Buffer.from(run, "hex").toString("latin1"));
  }
  if (depth < 2)
    for (const view of [...views]) for (const inner of decodedViews(view, depth + 1)) views.add(inner);
  return [...views];
}

/** The secrets found in anything model code received (strings, objects, byte arrays as numbers). */
function leakedSecrets(received: unknown): string[] {
  const texts: string[] = [];
  const walk = (value: unknown): void => {
    if (typeof value === "string") texts.push(value);
    else if (Array.isArray(value) && value.length > 0 && value.every((item) => typeof item === "number"))
      texts.push(Buffer.from(value as number[]).toString("latin1"));
    else if (Array.isArray(value)) value.forEach(walk);
    else if (typeof value === "object" && value !== null)
      for (const [key, item] of Object.entries(value)) {
        texts.push(key);
        walk(item);
      }
  };
  walk(received);
  const views = texts.flatMap((text) => decodedViews(text));
  const utf8 = (secret: string) => Buffer.from(secret, "utf8").toString("latin1");
  return SECRETS.filter((secret) =>
    views.some((view) => view.includes(secret) || view.includes(utf8(secret))),
  );
}

/** What model code received as text; byte arrays (returned as numbers) read as latin1 and UTF-16. */
function readable(received: unknown): string {
  return JSON.stringify(received, (_, value: unknown) =>
    Array.isArray(value) && value.length > 0 && value.every((item) => typeof item === "number")
      ? `${Buffer.from(value as number[]).toString("latin1")} ${Buffer.from(value as number[]).toString("utf16le")}`
      : value,
  );
}

/** The credentials the echo server received on a request, as it read them. */
function credentialsOf(request: IncomingMessage, url: URL): string[] {
  const cookie = /(?:^|;\s*)sid=([^;]*)/.exec(String(request.headers.cookie ?? ""))?.[1] ?? "";
  const basic = String(request.headers.authorization ?? "").replace(/^Basic /, "");
  return [
    String(request.headers["x-api-key"] ?? ""),
    url.searchParams.get("api_key") ?? "",
    decodeURIComponent(cookie),
    String(request.headers.authorization ?? ""),
    Buffer.from(basic, "base64").toString("utf8"),
  ];
}

/** How the echo server spells what it received: each a way real servers write text. */
const SPELLINGS: Record<
  string,
  { type: string; status?: number; body: (values: string[]) => Buffer | string }
> = {
  "json-escaped-slashes": {
    type: "application/json",
    body: (values) => JSON.stringify({ received: values }).replace(/\//g, "\\/"),
  },
  "json-unicode-escapes": {
    type: "application/json; charset=utf-8",
    body: (values) =>
      JSON.stringify({ received: values }).replace(
        /[<>&'+=/~ ]/g,
        (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, "0")}`,
      ),
  },
  "percent-lower-case-every-byte": {
    type: "text/plain",
    body: (values) =>
      values
        .map((value) =>
          [...Buffer.from(value)].map((byte) => `%${byte.toString(16).padStart(2, "0")}`).join(""),
        )
        .join("\n"),
  },
  "form-encoded-plus-for-space": {
    type: "application/x-www-form-urlencoded",
    body: (values) =>
      new URLSearchParams(values.map((value, index): [string, string] => [`v${index}`, value])).toString(),
  },
  "xml-character-references": {
    type: "application/xml",
    body: (values) =>
      `<received>${values.map((value) => `<v>${[...value].map((character) => `&#x${character.codePointAt(0)!.toString(16)};`).join("")}</v>`).join("")}</received>`,
  },
  "html-named-entities-escaped-twice": {
    type: "text/html",
    body: (values) =>
      values
        .map((value) =>
          value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/&/g, "&amp;"),
        )
        .join("<br>"),
  },
  "octet-stream-raw-bytes": {
    type: "application/octet-stream",
    body: (values) =>
      Buffer.concat([Buffer.from([0, 1, 2]), Buffer.from(values.join("\0")), Buffer.from([255])]),
  },
  "utf16-in-binary": {
    type: "application/octet-stream",
    body: (values) => Buffer.from(values.join("|"), "utf16le"),
  },
  "base64-and-base64url-in-json": {
    type: "application/json",
    body: (values) =>
      JSON.stringify({
        base64: values.map((value) => Buffer.from(value).toString("base64")),
        glued: values.map((value) => `tok_${Buffer.from(`x:${value}`).toString("base64url")}`),
      }),
  },
  "hex-and-double-percent": {
    type: "text/plain",
    body: (values) =>
      values
        .map(
          (value) => `${Buffer.from(value).toString("hex")} ${encodeURIComponent(encodeURIComponent(value))}`,
        )
        .join("\n"),
  },
  "an-error-response-and-its-status-text": {
    type: "text/html",
    status: 500,
    body: (values) => `<p>cannot use ${values.map((value) => value.replace(/&/g, "&amp;")).join(", ")}</p>`,
  },
};

const ECHO_DOCUMENT = {
  openapi: "3.0.3",
  info: { title: "Echo", version: "1" },
  components: {
    securitySchemes: {
      key: { type: "apiKey", in: "header", name: "X-Api-Key" },
      query: { type: "apiKey", in: "query", name: "api_key" },
      cookie: { type: "apiKey", in: "cookie", name: "sid" },
      basic: { type: "http", scheme: "basic" },
    },
  },
  security: [{ key: [], query: [], cookie: [], basic: [] }],
  paths: {
    "/echo/{spelling}": {
      get: {
        operationId: "echo",
        parameters: [{ name: "spelling", in: "path", required: true, schema: { type: "string" } }],
        responses: {
          "200": { description: "What the server received.", content: { "*/*": { schema: {} } } },
        },
      },
    },
  },
} as unknown as OpenApiDocument;

async function startEchoServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://127.0.0.1");
    const spelling = SPELLINGS[url.pathname.replace(/^\/echo\//, "")];
    const values = credentialsOf(request, url);
    if (!spelling) {
      response.writeHead(404).end();
      return;
    }
    const status = spelling.status ?? 200;
    // A status text echoing the query key: servers put what they read there too.
    response.writeHead(status, status === 200 ? "OK" : `Bad key ${values[1]}`, {
      "content-type": spelling.type,
      "x-echo": encodeURIComponent(values[0]!),
    });
    response.end(spelling.body(values));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Model code that calls one spelling and returns what it received (bytes as numbers, errors as their fields). */
const echoCall = (spelling: string) => `async function main(moss: Moss) {
  try {
    const body: unknown = await moss.echo.echo({ spelling: ${JSON.stringify(spelling)} });
    return body instanceof Uint8Array ? Array.from(body) : body;
  } catch (error) {
    const failure = error as Error & { status?: number; statusText?: string; body?: unknown };
    return { name: failure.name, message: failure.message, status: failure.status, statusText: failure.statusText, body: failure.body };
  }
}`;

let scratch: Awaited<ReturnType<typeof scratchFolder>>;
let echo: Awaited<ReturnType<typeof startEchoServer>>;
beforeAll(async () => {
  scratch = await scratchFolder("credential-attacks");
  echo = await startEchoServer();
  process.env[HEADER_KEY_VARIABLE] = HEADER_KEY;
});
afterAll(async () => {
  delete process.env[HEADER_KEY_VARIABLE];
  await echo?.close();
  await scratch?.remove();
});

describe.each(["process", "in-process"] as const)(
  "OpenAPI: a server that echoes the credentials (%s driver)",
  (driver) => {
    let runtime: MossRuntime;
    beforeAll(async () => {
      const typesFile = path.join(scratch.folder, `echo-${driver}.api.ts`);
      runtime = await compileServices(scratch.folder, driver, [["echo", "Echo", typesFile]], (compiler) =>
        bindOpenApi(compiler, "Echo", ECHO_DOCUMENT, {
          serverUrl: echo.url,
          typesFile,
          credentials: {
            key: { env: HEADER_KEY_VARIABLE },
            query: QUERY_KEY,
            cookie: COOKIE_KEY,
            basic: { username: USERNAME, password: PASSWORD },
          },
        }),
      );
    });
    afterAll(async () => {
      await runtime?.close();
    });

    test.each(Object.keys(SPELLINGS))(
      "%s: model code receives [redacted], never a secret",
      async (spelling) => {
        const execution = await runtime.execute({ code: echoCall(spelling) });
        expect(execution.error).toBeUndefined();
        // The attack reached the server and came back (not a refused call that proves nothing).
        expect(readable(execution.returns)).toMatch(/\[redacted\]/);
        expect(leakedSecrets(execution.returns)).toEqual([]);
        expect(
          leakedSecrets({ stdout: execution.stdout, calls: execution.calls, warnings: execution.warnings }),
        ).toEqual([]);
      },
    );
  },
);

describe("credentials are checked at bind time", () => {
  test("a credential read from an unset environment variable fails the bind, naming it and where it is read from", async () => {
    const bound = openApiService("Echo", ECHO_DOCUMENT, {
      serverUrl: echo.url,
      typesFile: path.join(scratch.folder, "unbound.api.ts"),
      credentials: { key: { env: "MOSS_ATTACK_UNSET_VARIABLE" } },
    });
    await expect(bound).rejects.toMatchObject({
      name: "MossError",
      code: "credential-missing",
      message:
        'credential "key" is missing: the environment variable MOSS_ATTACK_UNSET_VARIABLE is not set (read from credentials["key"])',
    });
  });

  test("the CLI answers a host setup whose credential is missing with exit 4 and the credential's name", async () => {
    const folder = scratch.folder;
    const { writeFile } = await import("node:fs/promises");
    await writeFile(
      path.join(folder, "cli-echo.ts"),
      'import { Moss as Parent } from "moss-ts";\nimport type { Echo } from "./cli-echo.api.ts";\nexport class Moss extends Parent {\n  echo!: Echo;\n}\n',
    );
    await writeFile(
      path.join(folder, "cli-echo.host.ts"),
      `import { bindOpenApi } from "moss-ts/openapi";
export async function setup(compiler: unknown) {
  await bindOpenApi(compiler as never, "Echo", ${JSON.stringify(ECHO_DOCUMENT)}, {
    serverUrl: ${JSON.stringify(echo.url)},
    typesFile: ${JSON.stringify(path.join(folder, "cli-echo.api.ts"))},
    credentials: { key: { env: "MOSS_ATTACK_UNSET_VARIABLE" } },
  });
}
`,
    );
    let status = 0;
    let stderr = "";
    try {
      execFileSync(process.execPath, ["bin/moss.js", "prompt", path.join(folder, "cli-echo.ts")], {
        encoding: "utf8",
        stdio: "pipe",
        env: { ...process.env, MOSS_ATTACK_UNSET_VARIABLE: "" },
      });
    } catch (error) {
      status = (error as { status: number }).status;
      stderr = String((error as { stderr: string }).stderr);
    }
    expect(status).toBe(4);
    expect(stderr).toContain(
      'credential "key" is missing: the environment variable MOSS_ATTACK_UNSET_VARIABLE is not set (read from credentials["key"])',
    );
  });
});

describe.each(["process", "in-process"] as const)(
  "MCP: servers that echo their credentials (%s driver)",
  (driver) => {
    const TOKEN = "mcp-env-token/with+odd<chars>&0042";
    const BEARER = "mcp-bearer/Token+0042==";
    let runtime: MossRuntime;
    let notes: Awaited<ReturnType<typeof startNotesServer>>;
    beforeAll(async () => {
      notes = await startNotesServer(BEARER);
      const hostileTypes = path.join(scratch.folder, `hostile-${driver}.api.ts`);
      const notesTypes = path.join(scratch.folder, `notes-${driver}.api.ts`);
      runtime = await compileServices(
        scratch.folder,
        driver,
        [
          ["hostile", "Hostile", hostileTypes],
          ["notes", "Notes", notesTypes],
        ],
        (compiler) =>
          Promise.all([
            bindMcp(
              compiler,
              "Hostile",
              {
                command: process.execPath,
                args: [HOSTILE_MCP_SERVER, "tools"],
                env: { HOSTILE_TOKEN: TOKEN },
              },
              { typesFile: hostileTypes },
            ),
            bindMcp(
              compiler,
              "Notes",
              { url: notes.url, headers: { authorization: `Bearer ${BEARER}` } },
              { typesFile: notesTypes },
            ),
          ]),
      );
    });
    afterAll(async () => {
      await runtime?.close();
      await notes?.close();
    });

    const leaks = (received: unknown): string[] => {
      const texts = JSON.stringify(received);
      return [TOKEN, BEARER].filter((secret) => decodedViews(texts).some((view) => view.includes(secret)));
    };

    test.each([
      ["a stdio server's env echoed in content blocks, in six spellings", "moss.hostile.echo_env()"],
      ["a stdio server's env echoed in a tool error", "moss.hostile.fail_env()"],
      ["a stdio server's env echoed in structured content", "moss.hostile.structured_env()"],
      ["a stdio server's env inside a base64 image", "moss.hostile.image_env()"],
      [
        "an HTTP server's bearer token echoed in a tool error",
        `moss.notes.add_note({ text: "leak: " + "${BEARER.slice(0, 8)}" + "${BEARER.slice(8)}" })`,
      ],
    ])("%s", async (_, call) => {
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  try { return await ${call}; } catch (error) { return { name: (error as Error).name, message: (error as Error).message }; }
}`,
      });
      expect(execution.error).toBeUndefined();
      expect(JSON.stringify(execution.returns)).toMatch(/\[redacted\]/);
      expect(leaks(execution.returns)).toEqual([]);
    });
  },
);
