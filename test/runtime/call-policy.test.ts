import { describe, expect, test } from "vitest";
import { decideByPolicies } from "../../engine/runtime/call-policy.ts";
import type { CallPolicy, PolicyCall } from "../../engine/types.ts";

const CALL: PolicyCall = { service: "bank", member: "transfer", args: ["alice", 5], line: 3 };
const policy = (verdict: unknown): CallPolicy => (() => verdict) as CallPolicy;

describe("decideByPolicies", () => {
  test("the strictest verdict wins: deny over ask over allow; no policy allows", () => {
    expect(decideByPolicies([], CALL)).toEqual({ verdict: "allow" });
    expect(decideByPolicies([policy("allow"), policy("ask")], CALL)).toEqual({ verdict: "ask" });
    expect(decideByPolicies([policy("ask"), policy("deny"), policy("allow")], CALL)).toEqual({
      verdict: "deny",
    });
  });

  test("anything but a verdict denies and names the policy's failure and the call", () => {
    for (const [given, named] of [
      [undefined, "answered undefined"],
      ["Allow", 'answered "Allow"'],
      [true, "answered true"],
      [{ verdict: "allow" }, "answered an object"],
    ] as const) {
      const outcome = decideByPolicies([policy("allow"), policy(given)], CALL);
      expect(outcome).toEqual({
        verdict: "deny",
        warning: expect.stringContaining(`a call policy ${named} for bank.transfer (line 3)`),
      });
    }
    const thrown = decideByPolicies(
      [
        () => {
          throw new RangeError("no rules loaded");
        },
      ],
      CALL,
    );
    expect(thrown).toEqual({
      verdict: "deny",
      warning: expect.stringContaining("threw RangeError: no rules loaded"),
    });
  });

  test("a promise is awaited; a rejection, a thenable whose then throws, or a non-verdict denies", async () => {
    const later = (verdict: unknown): CallPolicy => (async () => verdict) as CallPolicy;
    await expect(decideByPolicies([later("allow"), policy("allow")], CALL)).resolves.toEqual({
      verdict: "allow",
    });
    await expect(decideByPolicies([later("ask")], CALL)).resolves.toEqual({ verdict: "ask" });
    await expect(decideByPolicies([later("yes")], CALL)).resolves.toMatchObject({ verdict: "deny" });
    await expect(decideByPolicies([() => Promise.reject(new Error("store offline"))], CALL)).resolves.toEqual(
      { verdict: "deny", warning: expect.stringContaining("rejected with Error: store offline") },
    );
    const hostileThenable = {
      // biome-ignore lint/suspicious/noThenProperty: a thenable whose then getter throws is the case under test
      get then() {
        throw new Error("then getter");
      },
    };
    const outcome = await decideByPolicies([policy(hostileThenable)], CALL);
    expect(outcome.verdict).toBe("deny");
  });
});
