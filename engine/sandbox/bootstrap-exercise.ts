import { CALL_SITE_PROBE, encodeWire, type HandleShape, type HostOutcome } from "../membrane/index.ts";
import { DEFAULT_LIMITS } from "../types.ts";
import type { SandboxRunRequest, SessionSetup } from "./sandbox.ts";

/*
 * A session of trusted code that a process runs once, in an isolate of its own that no session ever gets, so the
 * bootstrap's code cache is made from an isolate that compiled what a session runs (`completeBootstrapCache`): a
 * module's names and `moss` installed, a service called synchronously and asynchronously, data fields changed and
 * saved, output written, a value returned. Every name and value here is made up; nothing of a real module or
 * session is in it.
 */

const CLASS: HandleShape = { id: 1, kind: "class", methods: [], properties: [] };
const SERVICE: HandleShape = {
  id: 2,
  kind: "object",
  methods: ["add", "total"],
  properties: ["label"],
  asyncMethods: ["total"],
};

/** Stands for a host object (not plain data, so the encoder asks for its handle). */
class HostObject {}
const handles = new Map<object, HandleShape>();
function handled(shape: HandleShape): object {
  const value = new HostObject();
  handles.set(value, shape);
  return value;
}
const encoded = (value: unknown) => encodeWire(value, { onHostObject: (object) => handles.get(object) });

/** The setup of the exercise's session: one class, one service, two data fields. */
export const EXERCISE_SETUP: SessionSetup = {
  globals: encoded({ Ledger: handled(CLASS) }),
  mossData: encoded({ records: [{ id: 1, tags: ["a"], done: false }], count: 0 }),
  mossServices: encoded({ ledger: handled(SERVICE) }),
  dataFields: ["records", "count"],
};

/** What the exercise's code runs: as the runtime prepares a snippet, with the call-site probe first. */
export const EXERCISE_RUN: SandboxRunRequest = {
  script: `${CALL_SITE_PROBE}();async function main(moss) {
  const added = moss.ledger.add(1, "one");
  const [total, again] = await Promise.all([moss.ledger.total(), moss.ledger.total()]);
  moss.records.push({ id: added, tags: [moss.ledger.label], done: total === again, at: new Date(0) });
  moss.count += 1;
  console.log("exercise", added, { total });
  return { added, total, kept: new Map([["records", moss.records.length]]) };
}
`,
  filename: "snippet.js",
  target: "main",
  args: [{ local: "moss" }],
  // Well within what it needs (~3 ms): a process never waits long for its first session should it not end.
  limits: { ...DEFAULT_LIMITS, wallTimeMs: 2_000, cpuTimeMs: 1_000 },
};

/** The host of the exercise's session: every call answers at once. */
export const EXERCISE_HOST = {
  call(): HostOutcome {
    return { kind: "value", wire: encoded(1) };
  },
  callBatch(calls: readonly unknown[]): HostOutcome[] {
    return calls.map(() => ({
      kind: "promise",
      settled: Promise.resolve({ kind: "value", wire: encoded(2) }),
    }));
  },
};
