import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, test } from "vitest";
import { MossCompiler } from "../../engine/compiler/moss-compiler.ts";
import type { MossRuntime } from "../../engine/runtime/moss-runtime.ts";

/*
 * Issue 18 (takeover by replay): a runtime journals each run as it goes (`onCheckpoint`), so when the process running
 * it dies, a runtime of the same session elsewhere resumes the run from the last checkpoint: the host calls that had
 * completed replay from the journal and are not made again.
 */

const ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const MODULE = path.join(ROOT, "test/fixtures/durable/context.ts");
const KEY = "a shared continuation key for the checkpoint tests";

/**
 * Makes the session's robot write to `journal`, an outside system both workers share; `stuck` is a note that never
 * gets an answer (the worker dies while that call is in flight).
 */
function shareJournal(runtime: MossRuntime, journal: string[], stuck?: string): void {
  const robot = runtime.mossInjections().robot as { note(text: string): Promise<number> };
  robot.note = async (text: string) => {
    if (text === stuck) return new Promise<number>(() => {});
    journal.push(text);
    return journal.length;
  };
}

const runtimes: MossRuntime[] = [];
afterAll(async () => {
  await Promise.all(runtimes.map((runtime) => runtime.close()));
});

async function compile(journal: string[], stuck?: string, context?: MossRuntime): Promise<MossRuntime> {
  const compiler = new MossCompiler({ sandbox: "in-process", continuationKey: KEY });
  if (context !== undefined) compiler.joinContext(context.dumpContext());
  const runtime = await compiler.compile(MODULE);
  runtimes.push(runtime);
  shareJournal(runtime, journal, stuck);
  return runtime;
}

const CODE = `async function main(moss: Moss) {
  await moss.robot.note("charged the card");
  moss.trips++;
  const lines = await moss.robot.note("shipped");
  return { trips: moss.trips, lines };
}`;

describe("run checkpoints: a run taken over elsewhere replays its completed host calls", () => {
  test("the run dies after its first call; another runtime of the session resumes it and that call is not repeated", async () => {
    const journal: string[] = [];
    const first = await compile(journal, "shipped");
    const checkpoints: string[] = [];
    first.onCheckpoint((checkpoint) => checkpoints.push(checkpoint));
    // The worker "dies" while the second call is in flight (its wall-clock limit ends the run here).
    const died = await first.execute({ code: CODE, limits: { wallTimeMs: 1_000 } });
    expect(died.ok).toBe(false);
    expect(journal).toEqual(["charged the card"]);
    expect(checkpoints).toHaveLength(1);

    const second = await compile(journal, undefined, first);
    const resumed = await second.resume(checkpoints.at(-1)!, {});
    expect(resumed.error).toBeUndefined();
    expect(resumed.ok).toBe(true);
    expect(resumed.returns).toEqual({ trips: 1, lines: 2 });
    expect(journal).toEqual(["charged the card", "shipped"]);
    expect(resumed.calls.map((call) => call.outcome)).toEqual(["replayed", "value"]);
  });

  test("a checkpoint resumes only in its own session", async () => {
    const journal: string[] = [];
    const first = await compile(journal, "shipped");
    const checkpoints: string[] = [];
    first.onCheckpoint((checkpoint) => checkpoints.push(checkpoint));
    await first.execute({ code: CODE, limits: { wallTimeMs: 1_000 } });
    const stranger = await compile(journal);
    await expect(stranger.resume(checkpoints.at(-1)!, {})).rejects.toMatchObject({
      code: "continuation-invalid",
    });
    expect(journal).toEqual(["charged the card"]);
  });

  test("a removed listener hears nothing; a run with no listener makes no checkpoint", async () => {
    const runtime = await compile([]);
    const heard: string[] = [];
    const remove = runtime.onCheckpoint((checkpoint) => heard.push(checkpoint));
    remove();
    const execution = await runtime.execute({ code: CODE });
    expect(execution.ok).toBe(true);
    expect(heard).toEqual([]);
  });
});
