import { describe, expect, test } from "vitest";
import { compileFromText } from "../helpers/compile-from-text.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";

/*
 * Issue 23 §2: cancel stops the code at once. An execute whose `signal` aborts ends its sandbox run then (kind
 * `aborted`), on both drivers, even while model code spins and makes no host call: before, the signal only stopped
 * host calls and the code ran on until its wall-time limit. The session keeps its last saved data and runs again.
 * The limits here are far longer than the test's own timeout: a run the signal did not end fails the test.
 */

const SOURCE = `import { Moss as Base } from "moss-ts";

/** A bell. */
export abstract class Bell {
  /** Rings once. */
  abstract ring(): Promise<number>;
}

export class Moss extends Base {
  bell!: Bell;
  /** Notes kept between turns. */
  notes: string[] = [];
}

// <moss-hide>
export class HostBell extends Bell {
  rings = 0;
  onRing: () => void = () => {};
  async ring() {
    this.rings++;
    this.onRing();
    return this.rings;
  }
}
export function __moss_compile__(compiler: any) {
  compiler.bind(Bell, new HostBell());
}
// </moss-hide>
`;

interface HostBell {
  rings: number;
  onRing: () => void;
}

const LONG = { wallTimeMs: 600_000, cpuTimeMs: 600_000 };
const runtimes = runtimesClosedAfterAll();

describe.each(["in-process", "process"] as const)(
  "a stopped execute ends its code at once (%s driver)",
  (sandbox) => {
    test("code spinning after its host call ends with kind aborted when the signal aborts; the session goes on", async () => {
      const runtime = await compileFromText(SOURCE, () => {}, { sandbox, typeCheck: "off" });
      runtimes.push(runtime);
      const bell = runtime.mossInjections().bell as HostBell;
      expect(
        (await runtime.execute({ code: 'function main(moss: Moss) { moss.notes.push("kept"); }' })).ok,
      ).toBe(true);
      const controller = new AbortController();
      bell.onRing = () => setImmediate(() => controller.abort(new Error("cancelled by a person")));
      const execution = await runtime.execute({
        code: `async function main(moss: Moss) {
  moss.notes.push("lost");
  await moss.bell.ring();
  for (;;) {}
}`,
        limits: LONG,
        signal: controller.signal,
      });
      expect(execution.ok).toBe(false);
      expect(execution.error?.kind, JSON.stringify(execution.error)).toBe("aborted");
      expect(bell.rings).toBe(1);
      const after = await runtime.execute({ code: "function main(moss: Moss) { return moss.notes; }" });
      expect(after.returns).toEqual(["kept"]);
    });

    test("code that spins from its first line, making no host call, ends with kind aborted when the signal aborts", async () => {
      const runtime = await compileFromText(SOURCE, () => {}, { sandbox, typeCheck: "off" });
      runtimes.push(runtime);
      expect(
        (await runtime.execute({ code: 'function main(moss: Moss) { moss.notes.push("kept"); }' })).ok,
      ).toBe(true);
      const controller = new AbortController();
      // Aborted while the code is surely spinning: the process driver runs model code in one slice as long as the
      // run's remaining time, so its process reads no stop message until the slice ends.
      setTimeout(() => controller.abort(new Error("cancelled by a person")), 300);
      const execution = await runtime.execute({
        code: `function main(moss: Moss) {
  moss.notes.push("lost");
  for (;;) {}
}`,
        limits: LONG,
        signal: controller.signal,
      });
      expect(execution.error?.kind, JSON.stringify(execution.error)).toBe("aborted");
      expect(execution.error?.message).toContain("stopped before it ended");
      const after = await runtime.execute({ code: "function main(moss: Moss) { return moss.notes; }" });
      expect(after.returns).toEqual(["kept"]);
    });

    test("a signal aborted before the execute starts runs nothing", async () => {
      const runtime = await compileFromText(SOURCE, () => {}, { sandbox, typeCheck: "off" });
      runtimes.push(runtime);
      const bell = runtime.mossInjections().bell as HostBell;
      const controller = new AbortController();
      controller.abort();
      const execution = await runtime.execute({
        code: "async function main(moss: Moss) { await moss.bell.ring(); }",
        limits: LONG,
        signal: controller.signal,
      });
      expect(execution.error?.kind).toBe("aborted");
      expect(bell.rings).toBe(0);
    });
  },
);
