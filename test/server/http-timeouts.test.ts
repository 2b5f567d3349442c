// A client that sends its headers or its body too slowly is answered 408 and disconnected (issue 18): the bound is
// `moss serve`'s own headers and request timeouts, not Node's 300 s. Event streams, whose requests are complete,
// stay open past them. A real server on 127.0.0.1 (PGlite), spoken to over raw TCP.
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MossError } from "../../engine/errors.ts";
import { httpServerOptions } from "../../engine/server/http/http-timeouts.ts";
import { TenantTokens } from "../../engine/server/tenant-tokens.ts";
import { DEFAULT_HTTP_TIMEOUTS } from "../../engine/server-defaults.ts";
import { printedSetting, runMoss } from "../helpers/moss-cli.ts";
import { call, readSse, TOKENS, useVaultServer, VAULT_MODULE } from "./server-harness.ts";

const HEADERS_TIMEOUT_MS = 200;
const REQUEST_TIMEOUT_MS = 400;

/** Writes `text` on a new connection to the server and resolves everything it answered once it closed. */
function rawExchange(url: string, text: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(text));
    let received = "";
    socket.on("data", (chunk) => {
      received += chunk.toString("latin1");
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(received));
  });
}

/** The status line and the JSON body of a raw answer, checked to be the API's error shape with a matching length. */
function errorAnswer(answer: string): {
  status: number;
  headers: string;
  error: { code: string; message: string };
} {
  const [head = "", body = ""] = answer.split("\r\n\r\n");
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]);
  expect(head).toMatch(/\r\ncontent-type: application\/json; charset=utf-8\r\n/i);
  expect(head).toMatch(/\r\nconnection: close(\r\n|$)/i);
  expect(head).toContain(`\r\nContent-Length: ${Buffer.byteLength(body)}`);
  const parsed = JSON.parse(body) as { error: { code: string; message: string } };
  expect(Object.keys(parsed)).toEqual(["error"]);
  return { status, headers: head, error: parsed.error };
}

describe("moss serve's request timeouts", () => {
  const vault = useVaultServer("moss-timeouts-", {
    http: {
      port: 0,
      tokens: TenantTokens.parse([`alice:${TOKENS.alice}`], "test"),
      headersTimeoutMs: HEADERS_TIMEOUT_MS,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
    },
  });

  it("answers a body that does not finish arriving with 408 and closes the connection; nothing is stored", async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on("warning", onWarning);
    const id = `slow-${randomUUID()}`;
    const body = JSON.stringify({ id });
    const answer = await rawExchange(
      vault.server.url!,
      [
        "POST /v1/threads HTTP/1.1",
        "Host: 127.0.0.1",
        `Authorization: Bearer ${TOKENS.alice}`,
        "Content-Type: application/json",
        `Content-Length: ${body.length + 10}`,
        "",
        body,
      ].join("\r\n"),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    const { error } = errorAnswer(answer);
    expect(error.code).toBe("request-timeout");
    expect(error.message).toContain(`${HEADERS_TIMEOUT_MS} ms for its headers and ${REQUEST_TIMEOUT_MS} ms`);
    expect((await call(vault.server, "GET", `/v1/threads/${id}`)).status).toBe(404);
    process.off("warning", onWarning);
    // The cut body is the client's fault (400 body-incomplete to nobody), not a server failure to log.
    expect(warnings.filter((warning) => warning.startsWith("moss serve:"))).toEqual([]);
  });

  it("answers headers that do not finish arriving with 408 and closes the connection", async () => {
    const answer = await rawExchange(vault.server.url!, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(errorAnswer(answer).error.code).toBe("request-timeout");
  });

  it("answers what Node cannot parse in the API's error shape too: 400 bad-request, 431 headers-too-large", async () => {
    const garbled = await rawExchange(vault.server.url!, "GET /health HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n");
    expect(garbled).toMatch(/^HTTP\/1\.1 400 /);
    expect(errorAnswer(garbled).error.code).toBe("bad-request");
    const huge = await rawExchange(
      vault.server.url!,
      `GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ${"a".repeat(20_000)}\r\n\r\n`,
    );
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);
    expect(errorAnswer(huge).error.code).toBe("headers-too-large");
  });

  it("keeps an event stream open past both timeouts: its request was complete", async () => {
    const thread = `open-${randomUUID()}`;
    expect((await call(vault.server, "POST", "/v1/threads", { body: { id: thread } })).status).toBe(201);
    const controller = new AbortController();
    const stream = await fetch(`${vault.server.url}/v1/threads/${thread}/events`, {
      headers: { authorization: `Bearer ${TOKENS.alice}`, accept: "text/event-stream" },
      signal: controller.signal,
    });
    try {
      // Longer than the request timeout and several of Node's checks of late requests.
      await new Promise((resolve) => setTimeout(resolve, REQUEST_TIMEOUT_MS * 3));
      vault.replies.push({ content: "Still here." });
      expect(
        (
          await call(vault.server, "POST", `/v1/threads/${thread}/runs`, {
            body: { message: "Are you there?" },
          })
        ).status,
      ).toBe(202);
      let answer: unknown;
      const ended = !(await readSse(stream, (message) => {
        const data = JSON.parse(message.data);
        if (message.event === "run-end") answer = data.answer;
        return message.event === "run-status" && data.status === "completed";
      }));
      expect(ended).toBe(false);
      expect(answer).toBe("Still here.");
    } finally {
      controller.abort();
    }
  });
});

describe("the timeouts' settings", () => {
  it("are 15 s for headers and 60 s for the whole request unless configured; bad values are config-invalid", () => {
    expect(httpServerOptions()).toMatchObject({ headersTimeout: 15_000, requestTimeout: 60_000 });
    expect(DEFAULT_HTTP_TIMEOUTS).toEqual({ headersTimeoutMs: 15_000, requestTimeoutMs: 60_000 });
    const refusal = (timeouts: Parameters<typeof httpServerOptions>[0]) => {
      try {
        httpServerOptions(timeouts);
      } catch (error) {
        return MossError.is(error, "config-invalid") ? error.message : `not config-invalid: ${error}`;
      }
      return "accepted";
    };
    expect(refusal({ headersTimeoutMs: 5_000, requestTimeoutMs: 1_000 })).toContain(
      "headersTimeoutMs (5000) must not be more than requestTimeoutMs (1000)",
    );
    expect(refusal({ requestTimeoutMs: 10 })).toContain(
      "requestTimeoutMs must be an integer of at least 100",
    );
    expect(refusal({ headersTimeoutMs: 100, requestTimeoutMs: 100 })).toBe("accepted");
  });

  it("come from --headers-timeout-ms / --request-timeout-ms or serve.* in moss.config.yaml; moss serve refuses a bad pair before it opens anything", async () => {
    const directory = await mkdtemp(join(tmpdir(), "moss-timeouts-cli-"));
    try {
      const printed = await runMoss(
        ["serve", VAULT_MODULE, "--token", "a:b", "--request-timeout-ms", "30000", "--print-config"],
        { env: { MOSS_SERVE_TOKENS: "", DATABASE_URL: "" } },
      );
      expect(printed.code).toBe(0);
      expect(printedSetting(printed.stdout, "serve.requestTimeoutMs")).toBe(
        "serve.requestTimeoutMs 30000 # --request-timeout-ms",
      );
      expect(printedSetting(printed.stdout, "serve.headersTimeoutMs")).toBe(
        "serve.headersTimeoutMs 15000 # default",
      );
      const data = join(directory, "data");
      const refused = await runMoss(
        [
          "serve",
          VAULT_MODULE,
          "--token",
          "a:b",
          "--port",
          "0",
          "--data-dir",
          data,
          "--headers-timeout-ms",
          "5000",
          "--request-timeout-ms",
          "1000",
        ],
        { env: { MOSS_SERVE_TOKENS: "", DATABASE_URL: "" } },
      );
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain("config-invalid");
      expect(refused.stderr).toContain(
        "headersTimeoutMs (5000) must not be more than requestTimeoutMs (1000)",
      );
      expect(existsSync(data)).toBe(false);
      const low = await runMoss(["serve", VAULT_MODULE, "--token", "a:b", "--headers-timeout-ms", "5"], {
        env: { MOSS_SERVE_TOKENS: "", DATABASE_URL: "" },
      });
      expect(low.code).toBe(2);
      expect(low.stderr).toContain("--headers-timeout-ms needs an integer from 100");
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  }, 60_000);
});
