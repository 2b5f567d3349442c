import { mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { loadOpenApi } from "../../../moss-modules/openapi/index.ts";

const FOLDER = fileURLToPath(new URL(`../../fixtures/.tmp/openapi-load-${process.pid}/`, import.meta.url));

beforeAll(() => mkdir(FOLDER, { recursive: true }));
afterAll(() => rm(FOLDER, { recursive: true, force: true }));

async function write(name: string, text: string): Promise<string> {
  const file = path.join(FOLDER, name);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, text);
  return file;
}

const VALID = `openapi: 3.0.0
info:
  title: t
  version: "1"
servers:
  - url: http://127.0.0.1:1/api
paths:
  /a:
    get:
      responses:
        "200":
          description: ok
`;

async function failure(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => "loaded",
    (error: Error) => `${error.name}: ${error.message}`,
  );
}

describe("loading OpenAPI documents and plugin folders", () => {
  test("a YAML syntax error names file, line and column", async () => {
    const file = await write("broken.yaml", `${VALID}  /b:\n    get: [unclosed\n`);
    expect(await failure(loadOpenApi(file))).toMatch(/^OpenApiLoadError: .*broken\.yaml:15:\d+ - /);
  });

  test("a schema violation names the place in the file and what is wrong", async () => {
    const file = await write(
      "bad-param.yaml",
      VALID.replace(
        "      responses:",
        "      parameters:\n        - name: q\n          in: body\n          schema:\n            type: string\n      responses:",
      ),
    );
    const message = await failure(loadOpenApi(file));
    expect(message).toContain(
      "bad-param.yaml:12:15 - paths./a.get.parameters.0.in must be equal to one of the allowed values",
    );
    expect(message).toMatch(/\(path, query, header, cookie\)|allowed values \(/);
  });

  test("a $ref to nothing is located at the place that refers to it", async () => {
    const file = await write(
      "bad-ref.yaml",
      VALID.replace(
        "          description: ok",
        "          description: ok\n          content:\n            application/json:\n              schema:\n                $ref: '#/components/schemas/Missing'",
      ),
    );
    const message = await failure(loadOpenApi(file));
    expect(message).toContain("bad-ref.yaml:16:17 - ");
    expect(message).toContain('Missing $ref pointer "#/components/schemas/Missing"');
  });

  test("a JSON document with a syntax error is located too", async () => {
    const file = await write(
      "broken.json",
      '{\n  "openapi": "3.0.0",\n  "info": {\n    "title": "t",,\n  }\n}\n',
    );
    expect(await failure(loadOpenApi(file))).toMatch(/broken\.json:4:\d+ - /);
  });

  test("Swagger 2.0 is refused with the reason", async () => {
    const file = await write(
      "swagger.json",
      JSON.stringify({ swagger: "2.0", info: { title: "t", version: "1" }, paths: {} }),
    );
    expect(await failure(loadOpenApi(file))).toContain(
      'only OpenAPI 3.0 and 3.1 documents are supported (openapi: "2.0")',
    );
  });

  test("plugin.json problems name the file and the field", async () => {
    const folder = path.join(FOLDER, "plugin-bad-auth");
    await write("plugin-bad-auth/openapi.yaml", VALID);
    await write(
      "plugin-bad-auth/plugin.json",
      JSON.stringify({ id: "x", name: "X", auth: { type: "token", args: {} } }),
    );
    expect(await failure(loadOpenApi(folder))).toContain(
      'plugin.json - "auth.type" must be one of header, param, cookie, oidc (got "token")',
    );
    await write("plugin-bad-auth/plugin.json", '{ "id": "x",\n  "name": }');
    expect(await failure(loadOpenApi(folder))).toMatch(/plugin\.json:2:\d+ - /);
  });

  test("a flow that jumps to a missing step, or has no start, is refused with its file", async () => {
    const folder = path.join(FOLDER, "plugin-bad-flow");
    await write("plugin-bad-flow/openapi.yaml", VALID);
    await write(
      "plugin-bad-flow/flows/f.yaml",
      "name: f\nsteps:\n  - name: start\n    call_type: api\n    params:\n      endpoint: GET /a\n    next: nowhere\n",
    );
    expect(await failure(loadOpenApi(folder))).toContain(
      'f.yaml - step "start" goes to "nowhere", which is not a step of this flow',
    );
    await write("plugin-bad-flow/flows/f.yaml", "name: f\nsteps:\n  - name: first\n    call_type: none\n");
    expect(await failure(loadOpenApi(folder))).toContain('f.yaml - steps need a step named "start"');
  });

  test("a folder without a document says what it expected", async () => {
    const folder = path.join(FOLDER, "empty-plugin");
    await mkdir(folder, { recursive: true });
    expect(await failure(loadOpenApi(folder))).toContain(
      "a plugin folder needs openapi.yaml or openapi.yml or openapi.json",
    );
  });
});
