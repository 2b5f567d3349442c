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
    // A checkpoint as the run begins, and as each call starts and completes: the second call never completed.
    expect(checkpoints).toHaveLength(4);

    // The worker died after the first call completed, before the second started (its "started" was never stored).
    const second = await compile(journal, undefined, first);
    const resumed = await second.resume(checkpoints[2]!, {});
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

  test("a call in flight at the death is in doubt: the resumed run pauses with a request naming it, a yes runs it", async () => {
    const journal: string[] = [];
    const first = await compile(journal, "shipped");
    const checkpoints: string[] = [];
    first.onCheckpoint((checkpoint) => checkpoints.push(checkpoint));
    await first.execute({ code: CODE, limits: { wallTimeMs: 1_000 } });
    expect(journal).toEqual(["charged the card"]);

    const second = await compile(journal, undefined, first);
    const paused = await second.resume(checkpoints.at(-1)!, {});
    expect(paused.ok).toBe(false);
    expect(paused.pending?.requests).toEqual([
      expect.objectContaining({
        id: expect.stringMatching(/^r2-[0-9a-f]{12}$/),
        kind: "approval",
        reason: "in-doubt",
        service: "robot",
        member: "note",
        args: ["shipped"],
        line: 4,
      }),
    ]);
    // Nothing ran again blindly.
    expect(journal).toEqual(["charged the card"]);
    const id = paused.pending!.requests[0]!.id;
    const resumed = await second.resume(paused.pending!.continuation, { [id]: { approved: true } });
    expect(resumed.error).toBeUndefined();
    expect(resumed.returns).toEqual({ trips: 1, lines: 2 });
    expect(journal).toEqual(["charged the card", "shipped"]);
  });

  test("a person's no to a call in doubt fails it with ApprovalDenied inside the code", async () => {
    const journal: string[] = [];
    const first = await compile(journal, "shipped");
    const checkpoints: string[] = [];
    first.onCheckpoint((checkpoint) => checkpoints.push(checkpoint));
    await first.execute({ code: CODE, limits: { wallTimeMs: 1_000 } });
    const second = await compile(journal, undefined, first);
    const paused = await second.resume(checkpoints.at(-1)!, {});
    const denied = await second.resume(paused.pending!.continuation, {
      [paused.pending!.requests[0]!.id]: { approved: false, reason: "it was shipped already" },
    });
    expect(denied.ok).toBe(false);
    expect(denied.error).toMatchObject({ name: "ApprovalDenied" });
    expect(denied.error?.message).toContain("it was shipped already");
    expect(journal).toEqual(["charged the card"]);
  });
});

const TILL = path.join(ROOT, "test/fixtures/durable/till-context.ts");

/** The till both workers share: `charges` and `marks` it made; a note in `stuck` never gets an answer. */
interface SharedTill {
  charges: string[];
  marks: string[];
  attempted: string[];
  stuck: Set<string>;
}

async function compileTill(
  till: SharedTill,
  context?: MossRuntime,
  sandbox: "in-process" | "process" = "in-process",
): Promise<MossRuntime> {
  const compiler = new MossCompiler({ sandbox, continuationKey: KEY });
  if (context !== undefined) compiler.joinContext(context.dumpContext());
  const runtime = await compiler.compile(TILL);
  runtimes.push(runtime);
  const host = runtime.mossInjections().till as {
    charge(note: string): Promise<number>;
    mark(status: string): Promise<number>;
  };
  const act = (list: string[]) => async (text: string) => {
    till.attempted.push(text);
    if (till.stuck.has(text)) return new Promise<number>(() => {});
    list.push(text);
    return list.length;
  };
  host.charge = act(till.charges);
  host.mark = act(till.marks);
  return runtime;
}

/** The payload of a checkpoint (readable by design), for what the journal was told. */
function payloadOf(checkpoint: string): { log: Array<{ key: string; started?: boolean; result?: unknown }> } {
  return JSON.parse(Buffer.from(checkpoint.split(".")[1]!, "base64url").toString("utf8"));
}

describe("takeover repeats nothing it can know of (issue 18)", () => {
  test.each(["in-process", "process"] as const)(
    "clock and random values read before a call replay on takeover: the resumed run sees the first attempt's (%s sandbox)",
    async (sandbox) => {
      const till: SharedTill = { charges: [], marks: [], attempted: [], stuck: new Set() };
      const code = `async function main(moss: Moss) {
  const before = [Date.now(), Math.random()];
  await moss.till.charge("card " + before.join(" "));
  const after = [Date.now(), Math.random(), new Date().getTime(), Math.random()];
  await moss.till.mark("sent " + after.join(" "));
  return { before, after };
}`;
      const first = await compileTill(till, undefined, sandbox);
      const checkpoints: string[] = [];
      first.onCheckpoint((checkpoint) => checkpoints.push(checkpoint));
      // The worker dies while `mark` is out: every mark is stuck in the first attempt.
      const host = first.mossInjections().till as { mark(status: string): Promise<number> };
      host.mark = async (status: string) => {
        till.attempted.push(status);
        return new Promise<number>(() => {});
      };
      const died = await first.execute({ code, limits: { wallTimeMs: 1_000 } });
      expect(died.ok).toBe(false);
      expect(till.charges).toHaveLength(1);
      const [sent] = till.attempted.filter((text) => text.startsWith("sent "));
      expect(sent).toBeDefined();

      // Another runtime of the session takes the run over from its last checkpoint (mark had started).
      const second = await compileTill(till, first, sandbox);
      const resumed = await second.resume(checkpoints.at(-1)!, {});
      expect(resumed.error).toBeUndefined();
      expect(resumed.ok).toBe(true);
      const values = (text: string) => text.split(" ").slice(1).map(Number);
      // The same values as the first attempt read: the charge replayed (not made again), mark ran with the same text.
      expect(resumed.returns).toEqual({ before: values(till.charges[0]!), after: values(sent!) });
      expect(till.charges).toHaveLength(1);
      expect(till.marks).toEqual([sent]);
      expect(resumed.calls.map((call) => call.outcome)).toEqual(["replayed", "value"]);
    },
  );

  test("a call of an @idempotent member in flight at the death runs again without asking", async () => {
    const till: SharedTill = { charges: [], marks: [], attempted: [], stuck: new Set(["shipped"]) };
    const code = `async function main(moss: Moss) {
  await moss.till.charge("card");
  return await moss.till.mark("shipped");
}`;
    const first = await compileTill(till);
    const checkpoints: string[] = [];
    first.onCheckpoint((checkpoint) => checkpoints.push(checkpoint));
    await first.execute({ code, limits: { wallTimeMs: 1_000 } });
    expect(payloadOf(checkpoints.at(-1)!).log.map((entry) => [entry.key, entry.started ?? false])).toEqual([
      ["till.charge", false],
      ["till.mark", true],
    ]);
    till.stuck = new Set();
    const second = await compileTill(till, first);
    const resumed = await second.resume(checkpoints.at(-1)!, {});
    expect(resumed.error).toBeUndefined();
    expect(resumed.returns).toBe(1);
    expect(till.charges).toEqual(["card"]);
    expect(till.marks).toEqual(["shipped"]);
  });

  test('a call that answers with a Promise runs only once the journal stored its "started" checkpoint', async () => {
    const till: SharedTill = { charges: [], marks: [], attempted: [], stuck: new Set() };
    const runtime = await compileTill(till);
    const seen: Array<{ started: string[]; chargesWhenStored: number }> = [];
    runtime.onCheckpoint((checkpoint) => {
      const started = payloadOf(checkpoint)
        .log.filter((entry) => entry.started)
        .map((entry) => entry.key);
      // The journal's write completes later; the call must not have run when it completes.
      return new Promise<void>((resolve) =>
        setImmediate(() => {
          seen.push({ started, chargesWhenStored: till.charges.length });
          resolve();
        }),
      );
    });
    const execution = await runtime.execute({
      code: `async function main(moss: Moss) {
  await moss.till.charge("one");
  await moss.till.charge("two");
}`,
    });
    expect(execution.error).toBeUndefined();
    // The last checkpoint's write may still be out when the run returns (nothing waits for it).
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual([
      { started: [], chargesWhenStored: 0 },
      { started: ["till.charge"], chargesWhenStored: 0 },
      { started: [], chargesWhenStored: 1 },
      { started: ["till.charge"], chargesWhenStored: 1 },
      { started: [], chargesWhenStored: 2 },
    ]);
  });

  test("a run is checkpointed as it begins: a taker of a run that died before any call runs it from its start", async () => {
    const code = `async function main(moss: Moss) {
  return await moss.till.charge("card");
}`;
    const first = await compileTill({ charges: [], marks: [], attempted: [], stuck: new Set(["card"]) });
    const checkpoints: string[] = [];
    first.onCheckpoint((checkpoint) => checkpoints.push(checkpoint));
    await first.execute({ code, limits: { wallTimeMs: 1_000 } });
    // As the run began: nothing in its log yet. (The worker died there, before its call started.)
    expect(payloadOf(checkpoints[0]!).log).toEqual([]);
    const till: SharedTill = { charges: [], marks: [], attempted: [], stuck: new Set() };
    const second = await compileTill(till, first);
    const resumed = await second.resume(checkpoints[0]!, {});
    expect(resumed.error).toBeUndefined();
    expect(resumed.returns).toBe(1);
    expect(till.charges).toEqual(["card"]);
    expect(resumed.calls.map((call) => call.outcome)).toEqual(["value"]);
  });
});
