// The one redactor of what a tenant reads (issue 23 §4), on its own: every secret the server holds, the bindings'
// secrets as they bind, the host's folders, the server's own state in events, and failures as stable codes.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MossError } from "../../engine/errors.ts";
import { SecretRedactor } from "../../engine/membrane/index.ts";
import { TENANT_FAILURES, TenantView } from "../../engine/server/tenant-view.ts";
import { printedSetting, runMoss } from "../helpers/moss-cli.ts";

describe("TenantView", () => {
  it("redacts a secret a binding binds after the view was made, and the view's own secrets stay out of the bindings' redactors", () => {
    const view = new TenantView(["operator-only-secret"]);
    const binding = `bound-later-${randomUUID()}`;
    new SecretRedactor().add(binding);
    expect(view.text(`token ${binding} and ${encodeURIComponent(`x ${binding}`)}`)).not.toContain(binding);
    expect(view.text(`b64 ${Buffer.from(binding).toString("base64")}`)).toBe("b64 [redacted]");
    const other = new SecretRedactor();
    other.add("unrelated-secret");
    expect(other.redactText("operator-only-secret")).toBe("operator-only-secret");
  });

  it("an approval request's doc, parameters and handles, and an answer event's reason, reach a tenant redacted", () => {
    const view = new TenantView(["operator-only-secret"]);
    const request = {
      id: "r1-0123456789ab",
      kind: "approval",
      member: "send",
      args: ["x"],
      parameters: ["key operator-only-secret"],
      doc: "Sends with the key operator-only-secret.\n@approval",
      handles: { 0: "Key operator-only-secret returned by call 1 (keys.get)" },
      reason: "tag",
    };
    const event = view.event({ type: "approval-request", request, description: "#r1 approval send" });
    expect(JSON.stringify(event)).not.toContain("operator-only-secret");
    expect(event.request.doc).toBe("Sends with the key [redacted].\n@approval");
    expect(view.value([request])[0]!.handles[0]).toBe("Key [redacted] returned by call 1 (keys.get)");
    const answer = view.event({
      type: "answer",
      requestId: "r1-0123456789ab",
      kind: "approval",
      approved: false,
      reason: "no: operator-only-secret",
      by: { tenant: "alice" },
      at: new Date(0).toISOString(),
    });
    expect(answer.reason).toBe("no: [redacted]");
  });

  it("a database URL adds the URL and its password, in either spelling", () => {
    const view = new TenantView(["postgres://moss:p%40ss-w0rd!@db.internal:5432/moss"]);
    expect(view.text("password p@ss-w0rd! or p%40ss-w0rd!")).toBe("password [redacted] or [redacted]");
    expect(view.text("at postgres://moss:p%40ss-w0rd!@db.internal:5432/moss")).not.toContain("db.internal");
  });

  it("turns a model failure into model-unavailable, keeps a tenant's own code, and hides any other failure", () => {
    const view = new TenantView(["sk-the-key-123"]);
    const auth = new MossError(
      "model-auth",
      "The model server at http://10.0.0.5/v1 refused sk-the-key-123 (401)",
    );
    expect(view.failure(auth)).toEqual({
      code: "model-unavailable",
      message: TENANT_FAILURES["model-unavailable"],
    });
    for (const code of ["model-connection", "model-request", "model-not-found"] as const) {
      expect(view.failure(new MossError(code, "x")).code).toBe("model-unavailable");
    }
    const expired = new MossError(
      "continuation-invalid",
      "the paused run expired (signed with sk-the-key-123)",
    );
    expect(view.failure(expired)).toEqual({
      code: "continuation-invalid",
      message: "the paused run expired (signed with [redacted])",
    });
    const overflow = new MossError(
      "model-request",
      "The system prompt and the task take 9000 tokens … Raise the context size (--context-tokens)",
      { reason: "context-overflow" },
    );
    expect(view.failure(overflow)).toEqual({
      code: "context-overflow",
      message: TENANT_FAILURES["context-overflow"],
    });
    expect(view.failure(view.failure(overflow)).code).toBe("context-overflow");
    const database = new MossError("database-error", "Cannot connect to PostgreSQL at db.internal:5432");
    expect(view.failure(database)).toEqual({
      code: "server-error",
      message: TENANT_FAILURES["server-error"],
    });
    expect(view.failure(new Error(`ENOENT: ${tmpdir()}/x`))).toEqual({
      code: "server-error",
      message: TENANT_FAILURES["server-error"],
    });
    // A failure already in the tenant's form comes out the same.
    expect(view.failure(view.failure(auth))).toEqual(view.failure(auth));
  });

  it("an event keeps what the conversation needs: no saved context, no continuation, no paused step, no host folder", () => {
    const view = new TenantView();
    const context = {
      version: 2,
      module: join(tmpdir(), "module", "context.ts"),
      properties: {},
      executed: false,
    };
    const execution = view.event({
      type: "execution",
      step: 1,
      observation: "paused",
      execution: {
        ok: false,
        returns: 7n,
        stdout: `wrote ${join(tmpdir(), "out.txt")}`,
        warnings: [],
        context,
        durationMs: 3,
        calls: [],
        pending: { requests: [{ id: "r1", kind: "approval" }], continuation: "signed.continuation" },
      },
    });
    expect(execution.execution).toEqual({
      ok: false,
      returns: 7n,
      stdout: "wrote <host path>/out.txt",
      warnings: [],
      durationMs: 3,
      calls: [],
      pending: { requests: [{ id: "r1", kind: "approval" }] },
    });
    const message = view.event({
      type: "message",
      message: {
        id: "m",
        role: "tool",
        content: "ok",
        metadata: {
          kind: "observation",
          toolCallId: "c1",
          context,
          pending: { continuation: "c" },
          chunks: 3,
        },
      },
    });
    expect(message.message.metadata).toEqual({ kind: "observation", toolCallId: "c1" });
    const error = view.event({
      type: "error",
      error: new MossError("model-connection", "ECONNREFUSED"),
      message: "x",
    });
    expect(error).toEqual({
      type: "error",
      error: { code: "model-unavailable", message: TENANT_FAILURES["model-unavailable"] },
      message: TENANT_FAILURES["model-unavailable"],
    });
  });
});

describe("moss serve --log-level", () => {
  it("is a setting like the others (flag, $MOSS_LOG_LEVEL, log.level in the config), and a wrong level is refused by name", async () => {
    const directory = await mkdtemp(join(tmpdir(), "moss-log-level-"));
    try {
      await writeFile(join(directory, "context.ts"), "export class Moss {}\n");
      const env = { MOSS_SERVE_TOKENS: "alice:alice-secret", DATABASE_URL: "", MOSS_LOG_LEVEL: "" };
      const module = join(directory, "context.ts");
      const byDefault = await runMoss(["serve", module, "--print-config"], { env });
      expect(printedSetting(byDefault.stdout, "log.level")).toBe('log.level "info" # default');
      const fromEnv = await runMoss(["serve", module, "--print-config"], {
        env: { ...env, MOSS_LOG_LEVEL: "debug" },
      });
      expect(printedSetting(fromEnv.stdout, "log.level")).toBe('log.level "debug" # $MOSS_LOG_LEVEL');
      const flag = await runMoss(["serve", module, "--print-config", "--log-level", "warn"], {
        env: { ...env, MOSS_LOG_LEVEL: "debug" },
      });
      expect(printedSetting(flag.stdout, "log.level")).toBe('log.level "warn" # --log-level');
      const wrong = await runMoss(["serve", module, "--print-config", "--log-level", "loud"], { env });
      expect(wrong.code).toBe(2);
      expect(wrong.stderr).toMatch(
        /--log-level must be one of fatal, error, warn, info, debug, trace, silent, got "loud"/,
      );
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  }, 60_000);
});
