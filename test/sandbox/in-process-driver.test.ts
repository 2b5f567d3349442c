import { expect, test } from "vitest";
import { InProcessDriver } from "../../engine/sandbox/in-process-driver.ts";
import { IsolateSession } from "../../engine/sandbox/isolate-session.ts";
import { DEFAULT_LIMITS } from "../../engine/types.ts";
import { Ball, TestMembrane } from "./test-membrane.ts";

test("close disposes every isolate, warm ones included, and refuses new sessions", async () => {
  const before = IsolateSession.liveCount;
  const driver = new InProcessDriver();
  const membrane = new TestMembrane();
  const sessions = await Promise.all(
    [1, 2, 3].map(() =>
      driver.open(membrane.setup({ ball: new Ball() }, { count: 0 }, {}), membrane, DEFAULT_LIMITS),
    ),
  );
  const result = await sessions[0]!.run({
    script: "function main() { return ball.label; }",
    filename: "snippet.js",
    target: "main",
    args: [],
    limits: DEFAULT_LIMITS,
  });
  expect(result.ok).toBe(true);
  expect(IsolateSession.liveCount).toBeGreaterThan(before + 2);
  await driver.close();
  expect(IsolateSession.liveCount).toBe(before);
  expect(sessions.every((session) => !session.alive)).toBe(true);
  await expect(driver.open(membrane.setup({}, {}, {}), membrane, DEFAULT_LIMITS)).rejects.toMatchObject({
    code: "sandbox-failed",
  });
});
