import { describe, expect, it } from "vitest";
import { hostErrorFields, MAX_ERROR_FIELDS_BYTES } from "../../engine/membrane/host/host-error.ts";

class ApiFailure extends Error {
  static readonly mossErrorFields = ["status", "detail", "request", "big", "stack", "_secret"];
  override name = "ApiFailure";
  status = 409;
  detail = { reason: "taken", file: "/home/someone/private/data.json" };
  request = new URL("http://127.0.0.1/secret?token=abc");
  big = "x".repeat(MAX_ERROR_FIELDS_BYTES * 2);
  _secret = "token-123";
  headers = { authorization: "Bearer token-123" };
}

describe("host error fields", () => {
  it("only fields a class opts into cross, as bounded plain data without host paths", () => {
    const fields = hostErrorFields(new ApiFailure("conflict"));
    expect(fields.name).toBe("ApiFailure");
    expect(fields.fields).toEqual({
      status: 409,
      detail: { reason: "taken", file: "<host path>/data.json" },
    });
    expect(JSON.stringify(fields)).not.toContain("token-123");
    expect(JSON.stringify(fields)).not.toContain("someone");
  });

  it("an error without the opt-in carries no fields, however many it has", () => {
    const error = Object.assign(new Error("boom"), {
      status: 500,
      config: { headers: { authorization: "x" } },
    });
    expect(hostErrorFields(error)).toEqual({ name: "Error", message: "boom" });
  });
});

describe("routes are not host paths", () => {
  it("an HTTP route in a host error stays readable; a path under a real root folder does not", async () => {
    const { redactHostPaths } = await import("../../engine/membrane/host/host-error.ts");
    expect(redactHostPaths("HTTP 404 from GET /pets/{petId}: '/pets/7' not found")).toBe(
      "HTTP 404 from GET /pets/{petId}: '/pets/7' not found",
    );
    expect(redactHostPaths("cannot open /etc/moss secrets/key.pem or '/usr/lib/x y/z.so'")).not.toMatch(
      /etc|usr|secrets|x y/,
    );
  });
});

describe("a host path spelled another way is still removed", () => {
  it("%-encoded and decomposed (NFD) spellings of a folder under a host root", async () => {
    const { mkdtempSync, mkdirSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const path = await import("node:path");
    const { redactHostPaths } = await import("../../engine/membrane/host/host-error.ts");
    const root = mkdtempSync(path.join(tmpdir(), "moss-spelling-"));
    const folder = path.join(root, "café privé 'x', #1");
    mkdirSync(folder);
    try {
      for (const text of [
        `bad ${encodeURI(folder)}/x.txt`,
        `bad ${encodeURI(folder).normalize("NFD")}/x.txt`,
        `cannot open ${folder.normalize("NFD")}/x.txt`,
      ]) {
        const redacted = redactHostPaths(text);
        expect(redacted, text).not.toMatch(/caf|priv|moss-spelling/i);
        expect(redacted).toContain("x.txt");
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
