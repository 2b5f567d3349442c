// What an idle `moss serve` holds (issue 27): the start proves the module loads without starting a type-check worker
// (TypeScript and its lib, ~140 MiB, which the start used to load and end again); the first run that is checked
// starts one, and the run is checked as before. Every type-check worker started is counted.
import { describe, expect, it, vi } from "vitest";

const started = vi.hoisted(() => [] as string[]);
vi.mock("../../engine/check/check-worker-start.ts", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../engine/check/check-worker-start.ts")>();
  return {
    ...original,
    startCheckWorker: (...args: Parameters<typeof original.startCheckWorker>) => {
      started.push("type-check worker");
      return original.startCheckWorker(...args);
    },
  };
});

// The suite runs files one after another in a shared worker (vitest.config.ts: isolate false): the server's modules,
// and with them a spare worker or a warm pool, may already be loaded by an earlier file. They load afresh here, with
// the mock above in place.
vi.resetModules();
const { call, code, readEvents, useVaultServer } = await import("./server-harness.ts");

describe("moss serve's idle footprint (PGlite)", () => {
  const fixture = useVaultServer("moss-serve-footprint-");

  it("starts no type-check worker before a run needs one; a run's strict check then still refuses bad code", async () => {
    const server = fixture.server;
    expect(started, "type-check workers started by the server's start").toEqual([]);
    const thread = (await call(server, "POST", "/v1/threads", { body: {} })).body.thread.id as string;
    fixture.replies.push(code("  const wrong: number = moss.vault.balance;"), { content: "Could not." });
    expect(
      (await call(server, "POST", `/v1/threads/${thread}/runs`, { body: { message: "Go." } })).status,
    ).toBe(202);
    const events = await readEvents(
      server,
      thread,
      (event) => event.event === "run-status" && ["completed", "failed"].includes(event.data.status),
    );
    const execution = events.find((event) => event.event === "execution");
    expect(execution?.data.execution.error?.kind, JSON.stringify(execution?.data)).toBe("type");
    expect(started.length, "type-check workers started once a run was checked").toBeGreaterThan(0);
  });
});
