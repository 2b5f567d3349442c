import { describe, expect, test } from "vitest";
import { currentRunSignal } from "../../engine/runtime/run-signal.ts";
import type { PolicyVerdict } from "../../engine/types.ts";
import { compileFromText } from "../helpers/compile-from-text.ts";
import { runtimesClosedAfterAll } from "../helpers/runtimes-closed-after-all.ts";

/*
 * Issue 24 §7: host work a run started ends with that run. A call its run's policy decided only after the run ended
 * never starts, even while the session's next run is going on (before, it started then, under the next run's signal,
 * so nothing ever aborted it); a call that starts does so under its own run's signal.
 */

const SOURCE = `import { Moss as Base, currentRunSignal } from "moss-ts";

/** A journal. */
export abstract class Journal {
  /** Writes a line. */
  abstract write(line: string): Promise<number>;
  /** Waits for the host. */
  abstract wait(): Promise<string>;
}

export class Moss extends Base {
  journal!: Journal;
}

// <moss-hide>
export class HostJournal extends Journal {
  written: string[] = [];
  signals: Array<AbortSignal | undefined> = [];
  waiting: Array<() => void> = [];
  onWait: () => void = () => {};
  async write(line: string) {
    this.written.push(line);
    this.signals.push(currentRunSignal());
    return this.written.length;
  }
  wait() {
    this.signals.push(currentRunSignal());
    this.onWait();
    return new Promise<string>((resolve) => this.waiting.push(() => resolve("waited")));
  }
}
export function __moss_compile__(compiler: any) {
  compiler.bind(Journal, new HostJournal());
}
// </moss-hide>
`;

interface HostJournal {
  written: string[];
  signals: Array<AbortSignal | undefined>;
  waiting: Array<() => void>;
  onWait: () => void;
}

const runtimes = runtimesClosedAfterAll();

describe.each(["in-process", "process"] as const)("a run's host calls end with it (%s driver)", (sandbox) => {
  test("a call its policy allows after the run timed out never starts, even during the session's next run", async () => {
    let release: (verdict: PolicyVerdict) => void = () => {};
    const decided = new Promise<PolicyVerdict>((resolve) => {
      release = resolve;
    });
    const runtime = await compileFromText(
      SOURCE,
      (compiler) => {
        compiler.policy((call) => (call.member === "write" ? decided : "allow"));
      },
      { sandbox, typeCheck: "off" },
    );
    runtimes.push(runtime);
    const journal = runtime.mossInjections().journal as HostJournal;
    const first = await runtime.execute({
      code: `async function main(moss: Moss) {
  await moss.journal.write("from the first run");
}`,
      limits: { wallTimeMs: 1_000 },
    });
    expect(first.error?.kind).toBe("timeout");

    // The next run is waiting on the host when the first run's policy answers.
    const waiting = new Promise<void>((resolve) => {
      journal.onWait = resolve;
    });
    const second = runtime.execute({
      code: `async function main(moss: Moss) {
  return await moss.journal.wait();
}`,
    });
    await waiting;
    release("allow");
    await decided;
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    for (const done of journal.waiting.splice(0)) done();
    const execution = await second;
    expect(execution.returns).toBe("waited");
    expect(journal.written).toEqual([]);
    // The second run's own call ran under its own signal, which its end aborted.
    expect(journal.signals).toHaveLength(1);
    expect(journal.signals[0]?.aborted).toBe(true);
  });

  test("currentRunSignal() in a host call is its run's, aborted when that run ends", async () => {
    const runtime = await compileFromText(SOURCE, () => {}, { sandbox, typeCheck: "off" });
    runtimes.push(runtime);
    const journal = runtime.mossInjections().journal as HostJournal;
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  return await moss.journal.write("one");
}`,
    });
    expect(execution.returns).toBe(1);
    expect(journal.signals).toHaveLength(1);
    expect(journal.signals[0]?.aborted).toBe(true);
    expect(currentRunSignal()).toBeUndefined();
  });
});
