import { type Context, trace as otelTrace, type Span, SpanStatusCode } from "@opentelemetry/api";
import { hostErrorWire } from "../sandbox/host-error.ts";
import type { HostMembrane as HostMembraneContract, HostOutcome } from "../sandbox/sandbox.ts";
import { decodeWire, encodeWire } from "../sandbox/wire.ts";
import type { Answers, CallPolicy, HostCallRecord, PendingRequest } from "../types.ts";
import type { CallTarget, HostMembrane } from "./host-membrane.ts";

/*
 * The run log: every host call a run makes passes through here. A call is answered from the log when a resumed run
 * replays it, decided (allow, deny, ask) when it is new, run on the host and recorded when allowed, and traced in
 * `execution.calls` and OpenTelemetry spans either way.
 */

/** One host call of a run, in call order, as a continuation carries it. */
export interface LogEntry {
  /** What was called: `service.member`, a function's name, `ask`; reads end in ` (read)`. */
  key: string;
  /** The wire-encoded arguments, as the isolate sent them. */
  args: string;
  /** What the called handle denotes (see `RunLog`): a replayed call must act on the same thing. */
  on?: string;
  /** What each handle in `args` denotes, in order: a replayed call must be given the same things. */
  handles?: string[];
  /** The result: `value`/`error` answered at once, `promise-value`/`promise-error` through a promise. */
  result?: { kind: "value" | "error" | "promise-value" | "promise-error"; wire: string; handles: boolean };
  /** The request the call waited for (still waiting when `result` is absent). */
  request?: PendingRequest;
  /** The runtime that ran the call: its handles (host objects in the result) exist only there. */
  origin?: string;
}

/** A denied call: model code sees an `Error` named `ApprovalDenied` with `reason` and `member`. */
export class ApprovalDenied extends Error {
  static readonly mossErrorFields = ["reason", "member"];
  override readonly name = "ApprovalDenied";
  readonly code = "approval-denied";
  constructor(
    readonly member: string,
    readonly reason: string,
  ) {
    super(`${member} was not approved: ${reason}`);
  }
}

/** The snippet's 1-based line of a call site in the running script (see `callSiteOf`), when known. */
export type LineOf = (site: number) => number | undefined;

export interface RunLogOptions {
  membrane: HostMembrane;
  /** The log of the run being resumed (empty for a new run). */
  replay: readonly LogEntry[];
  answers: Answers;
  policy: CallPolicy | undefined;
  lineOf: LineOf;
  /** The lines of the model's code around a snippet line: made only for a request a person reads. */
  frameOf: (line: number) => string;
  /** Identifies the runtime (its membrane's handles). */
  origin: string;
  /** Whether a call may wait for a person; when false, such a call is denied with this reason. */
  canPause: boolean | string;
  /** The OpenTelemetry context of the run's span: each host call's span is its child. */
  traceContext?: Context;
  /** How many bytes (arguments, results, requests) the kept log may hold; past it the run can no longer pause. */
  maxLogBytes: number;
  /** Called each time a new call of the kept log gets its result (or its denial): a journal may store the log. */
  onSettled?: () => void;
}

type Operation = "call" | "construct" | "get";

/** What becomes of a new call: it runs, waits for a person (an approval, an answer), or is denied. */
type Decision =
  | { kind: "run"; run: () => HostOutcome }
  | { kind: "pending-approval"; reason: "tag" | "policy"; run: () => HostOutcome }
  | { kind: "pending-ask"; question: string; choices: unknown }
  | { kind: "denied"; reason: string };

/** What a handle denotes in a run: the first thing found for it, everything found for it, and how a person reads it. */
interface Denotation {
  denotes: string;
  all: Set<string>;
  description: string;
}

/** moss-ts's tracer: a no-op unless the host registered an OpenTelemetry tracer provider. */
export const tracer = () => otelTrace.getTracer("moss-ts");

/** The membrane of one run: replays, decides, records and traces every host call. */
export class RunLog implements HostMembraneContract {
  readonly #options: RunLogOptions;
  /** The new log: replayed entries, then what this run did. */
  readonly entries: LogEntry[] = [];
  readonly calls: HostCallRecord[] = [];
  /** Requests this run waits for. */
  readonly requests: PendingRequest[] = [];
  /** The first difference from the replayed log, when the run left it. */
  diverged: string | undefined;
  /** Calls made so far (the index of the next one in the log). */
  #count = 0;
  /**
   * What the handles results of this run brought denote: `@<call>.<n>`, the n-th handle of the result of call
   * <call> (1-based, as the log counts). Handles the runtime installed denote their position (`moss.silo`); any
   * other handle denotes itself in this runtime only. A logged call matches a new one only when each handle denotes
   * the same thing in both: ids differ between runtimes, and pairing ids as they showed up let a resumed run hand an
   * approved call another host object than the one the person approved.
   */
  readonly #denotations = new Map<number, Denotation>();
  /** Bytes the kept log holds. */
  #logBytes = 0;
  /**
   * Why the log is no longer kept: model code sent or received more than `maxLogBytes` through host calls (every
   * argument and result of a run that can pause is kept for its continuation, so a loop of large calls or thousands
   * of large `moss.ask` questions filled the host's memory, and a pause made a continuation of hundreds of MB).
   */
  overflowed: string | undefined;

  constructor(options: RunLogOptions) {
    this.#options = options;
  }

  /** Whether the run made every call its replayed log holds (a resumed run that ends early took another path). */
  get replayComplete(): boolean {
    return this.#count >= this.#options.replay.length;
  }

  /** How many host calls the run made. */
  get callCount(): number {
    return this.#count;
  }

  /** The replayed call the run did not reach, described (when it ended early). */
  get firstMissed(): string | undefined {
    const entry = this.#options.replay[this.#count];
    return entry === undefined ? undefined : entry.key;
  }

  call(handle: number, member: string | null, args: string, line = 0): HostOutcome {
    return this.#handle("call", handle, member, args, line, () =>
      this.#options.membrane.call(handle, member, args),
    );
  }

  construct(handle: number, args: string, line = 0): HostOutcome {
    return this.#handle("construct", handle, null, args, line, () =>
      this.#options.membrane.construct(handle, args),
    );
  }

  get(handle: number, property: string, line = 0): HostOutcome {
    return this.#handle("get", handle, property, "[]", line, () =>
      this.#options.membrane.get(handle, property),
    );
  }

  ask(args: string, line = 0): HostOutcome {
    const membrane = this.#options.membrane;
    const values = membrane.argumentsAsData(args);
    const [question, options] = values as [unknown, { choices?: unknown } | undefined];
    const choices = options?.choices;
    if (typeof question !== "string" || question.trim() === "") {
      return errorOutcome(new TypeError("moss.ask(question) needs the question as a non-empty string"));
    }
    if (
      choices !== undefined &&
      (!Array.isArray(choices) || choices.length === 0 || !choices.every((c) => typeof c === "string"))
    ) {
      return errorOutcome(new TypeError("moss.ask: options.choices must be a non-empty array of strings"));
    }
    const target: CallTarget = { service: undefined, member: "ask", approval: false, sync: false };
    return this.#record(target, undefined, "ask", args, line, () => ({
      kind: "pending-ask",
      question,
      choices,
    }));
  }

  #handle(
    operation: Operation,
    handle: number,
    member: string | null,
    args: string,
    scriptLine: number,
    run: () => HostOutcome,
  ): HostOutcome {
    const target = this.#options.membrane.describe(operation, handle, member);
    // An unknown handle: the membrane answers with its own error; nothing to decide or record.
    if (target === undefined) return run();
    const key = `${target.service === undefined ? "" : `${target.service}.`}${target.member}${operation === "get" ? " (read)" : ""}`;
    return this.#record(target, handle, key, args, scriptLine, (line) => {
      // Reads are not policy calls, but a read of an `@approval` member (a getter: host code runs) waits for a yes.
      if (operation === "get" && !target.approval) return { kind: "run", run };
      const decision =
        operation === "get"
          ? ({ kind: "ask", reason: "tag" } as const)
          : this.#decide(target, args, line, handle);
      if (decision.kind === "ask") return { kind: "pending-approval", reason: decision.reason, run };
      if (decision.kind === "deny") return { kind: "denied", reason: decision.reason };
      return { kind: "run", run };
    });
  }

  #decide(
    target: CallTarget,
    args: string,
    line: number | undefined,
    handle?: number,
  ): { kind: "allow" } | { kind: "deny"; reason: string } | { kind: "ask"; reason: "tag" | "policy" } {
    const policy = this.#options.policy;
    let verdict: ReturnType<CallPolicy>;
    if (policy !== undefined) {
      try {
        verdict = policy({
          service: target.service,
          member: target.member,
          args: this.#argumentsAsData(args),
          ...(handle === undefined ? {} : { target: this.#describe(handle) }),
          line,
        });
      } catch {
        return { kind: "deny", reason: "the host's policy failed while deciding this call" };
      }
    }
    if (verdict === "deny") return { kind: "deny", reason: "denied by the host's policy" };
    // `@approval` asks whatever the policy allows: the declaration promises a person sees every call.
    if (target.approval) return { kind: "ask", reason: "tag" };
    if (verdict === "ask") return { kind: "ask", reason: "policy" };
    return { kind: "allow" };
  }

  /**
   * One call: answered from the replayed log while the run follows it, else decided by `decide` and run (or made to
   * wait, or denied), recorded in the new log and traced. `handle` is the handle called (none for `moss.ask`).
   */
  #record(
    target: CallTarget,
    handle: number | undefined,
    key: string,
    args: string,
    scriptLine: number,
    decide: (line: number | undefined) => Decision,
  ): HostOutcome {
    if (this.diverged !== undefined)
      return { kind: "refuse", failure: "replay-diverged", message: this.diverged };
    const index = this.#count++;
    const line = scriptLine > 0 ? this.#options.lineOf(scriptLine) : undefined;
    const trace: HostCallRecord = {
      member: key,
      ...(line === undefined ? {} : { line }),
      outcome: "value",
      durationMs: 0,
      argsBytes: args.length,
    };
    this.calls.push(trace);
    const ids = args.includes('["H",') ? (handleSkeleton(args)?.ids ?? []) : [];
    const denoted = {
      ...(handle === undefined ? {} : { on: this.#denote(handle).denotes }),
      ...(ids.length === 0 ? {} : { handles: ids.map((id) => this.#denote(id).denotes) }),
    };
    const logged = this.#options.replay[index];
    if (logged !== undefined) {
      const differs =
        logged.key !== key
          ? "where the log has"
          : !this.#denotesAll(
                logged.on === undefined ? [] : [logged.on],
                handle === undefined ? [] : [handle],
              )
            ? "on another object than"
            : !this.#denotesAll(logged.handles ?? [], ids) || !sameData(logged.args, args)
              ? "with other arguments than"
              : undefined;
      if (differs !== undefined) {
        this.#divergeAt(index, line, `it called ${key} ${differs} ${logged.key}`);
        this.calls.pop();
        return { kind: "refuse", failure: "replay-diverged", message: this.diverged! };
      }
      if (logged.result !== undefined && !(logged.result.handles && logged.origin !== this.#options.origin)) {
        this.#keep({ ...logged });
        trace.outcome = "replayed";
        trace.resultBytes = logged.result.wire.length;
        this.#learn(index, key, logged.result.wire);
        return replayedOutcome(logged.result);
      }
      if (logged.request !== undefined && logged.result === undefined) {
        return this.#answered(logged, index, key, args, denoted, trace, () => decide(line), target.sync);
      }
      // A result holding host objects of another runtime: the call runs again here to make them (see README).
    }
    const rerun = logged?.result?.handles ? logged.result : undefined;
    const decision = decide(line);
    const entry: LogEntry = { key, args, ...denoted, origin: this.#options.origin };
    this.#keep(entry);
    if (decision.kind === "denied") return this.#deny(entry, trace, target.member, decision.reason);
    if (decision.kind === "run") return this.#run(entry, index, line, trace, decision.run, rerun);
    if (this.#options.canPause !== true || this.overflowed !== undefined) {
      const reason =
        this.overflowed ??
        (typeof this.#options.canPause === "string" ? this.#options.canPause : "this run cannot pause");
      return this.#deny(entry, trace, target.member, reason);
    }
    const site = line === undefined ? {} : { line, code: this.#options.frameOf(line) };
    const request: PendingRequest =
      decision.kind === "pending-ask"
        ? {
            id: `r${index + 1}`,
            kind: "clarification",
            question: decision.question,
            ...(Array.isArray(decision.choices) ? { choices: decision.choices as string[] } : {}),
            ...site,
          }
        : {
            id: `r${index + 1}`,
            kind: "approval",
            ...(target.service === undefined ? {} : { service: target.service }),
            member: target.member,
            ...(handle === undefined ? {} : { target: this.#describe(handle) }),
            args: this.#argumentsAsData(args),
            reason: decision.reason,
            ...site,
          };
    return this.#wait(entry, trace, request, target.sync && decision.kind === "pending-approval");
  }

  /** Marks the run as having left its log at call `index`: nothing after it runs. */
  #divergeAt(index: number, line: number | undefined, what: string): void {
    this.diverged ??=
      `the resumed run left its log at call ${index + 1} of ${this.#options.replay.length}` +
      `${line === undefined ? "" : ` (line ${line})`}: ${what}; nothing after that ran`;
  }

  /** Whether each handle given denotes what the logged one did (a handle several calls returned denotes each). */
  #denotesAll(logged: readonly string[], given: readonly number[]): boolean {
    return logged.length === given.length && given.every((id, i) => this.#denote(id).all.has(logged[i]!));
  }

  /** What a handle denotes and how a person reads it (see `#denotations`). */
  #denote(handle: number): Denotation {
    const known = this.#denotations.get(handle);
    if (known !== undefined) return known;
    const info = this.#options.membrane.info(handle);
    const type = info?.typeName;
    const denotes = info?.origin ?? `${this.#options.origin}#${handle}`;
    return {
      denotes,
      all: new Set([denotes]),
      description:
        info?.origin === undefined
          ? `${type ?? "a host object"} from before this run`
          : `${info.origin}${type === undefined ? "" : `: ${type}`}`,
    };
  }

  /** How a person (or a policy) reads a handle: what it denotes, and its declared type. */
  #describe(handle: number): string {
    return this.#denote(handle).description;
  }

  /** The arguments as data, each host object described by what it denotes. */
  #argumentsAsData(args: string): unknown[] {
    return this.#options.membrane.argumentsAsData(args, (id) => `[${this.#describe(id)}]`);
  }

  /** Learns what the handles a call's result brought denote: the n-th handle of call `index`'s result. */
  #learn(index: number, key: string, wire: string): void {
    if (!wire.includes('["H",')) return;
    const ids = handleSkeleton(wire)?.ids ?? [];
    for (const [n, id] of ids.entries()) {
      const info = this.#options.membrane.info(id);
      if (info === undefined || info.origin !== undefined) continue;
      const denotes = `@${index + 1}.${n}`;
      const known = this.#denotations.get(id);
      if (known !== undefined) {
        known.all.add(denotes);
        continue;
      }
      this.#denotations.set(id, {
        denotes,
        all: new Set([denotes]),
        description: `${info.typeName ?? "a host object"}${ids.length > 1 ? ` #${n + 1}` : ""} returned by call ${index + 1} (${key})`,
      });
    }
  }

  /** Keeps an entry in the new log (only runs that can pause keep one: nothing else reads it). */
  #keep(entry: LogEntry): void {
    if (this.#options.canPause !== true || this.overflowed !== undefined) return;
    this.entries.push(entry);
    this.#grow(
      entry.key.length +
        entry.args.length +
        (entry.result?.wire.length ?? 0) +
        (entry.request ? JSON.stringify(entry.request).length : 0),
    );
  }

  /** Counts bytes the kept log holds; past the limit the log is dropped and the run can no longer pause. */
  #grow(bytes: number): void {
    if (this.overflowed !== undefined || this.#options.canPause !== true) return;
    this.#logBytes += bytes;
    if (this.#logBytes <= this.#options.maxLogBytes) return;
    this.overflowed = `the run's host calls passed ${this.#options.maxLogBytes} bytes of arguments and results, more than a paused run can keep: it can no longer pause`;
    this.entries.length = 0;
  }

  /** A logged call that waited: its answer decides it now, or it waits again. */
  #answered(
    logged: LogEntry,
    index: number,
    key: string,
    args: string,
    denoted: { on?: string; handles?: string[] },
    trace: HostCallRecord,
    decide: () => Decision,
    sync: boolean,
  ): HostOutcome {
    const request = logged.request!;
    const entry: LogEntry = { key, args, ...denoted, request, origin: this.#options.origin };
    this.#keep(entry);
    const answer = this.#options.answers[request.id];
    if (answer === undefined) return this.#wait(entry, trace, request, sync && request.kind === "approval");
    if (request.kind === "clarification") {
      const text = "answer" in answer ? answer.answer : "";
      const outcome = { kind: "value" as const, wire: encodeWire(text) };
      entry.result = { kind: "promise-value", wire: outcome.wire, handles: false };
      this.#grow(outcome.wire.length);
      trace.resultBytes = outcome.wire.length;
      this.#options.onSettled?.();
      return { kind: "promise", settled: Promise.resolve(outcome) };
    }
    if ("approved" in answer && answer.approved) {
      const decision = decide();
      if (decision.kind === "pending-approval" || decision.kind === "run") {
        return this.#run(entry, index, undefined, trace, decision.run);
      }
    }
    const reason =
      "approved" in answer && !answer.approved && answer.reason ? answer.reason : "denied by a person";
    return this.#deny(entry, trace, request.kind === "approval" ? request.member : key, reason);
  }

  /**
   * The call waits for its request's answer. A call that may answer with a plain value (`stop`) stops the run at
   * once: the code would otherwise go on with a Promise where it expects the value and send it to later calls.
   */
  #wait(entry: LogEntry, trace: HostCallRecord, request: PendingRequest, stop: boolean): HostOutcome {
    if (entry.request === undefined) this.#grow(JSON.stringify(request).length);
    entry.request = request;
    trace.outcome = "pending";
    this.requests.push(request);
    return stop ? { kind: "pause" } : { kind: "pending" };
  }

  #deny(entry: LogEntry, trace: HostCallRecord, member: string, reason: string): HostOutcome {
    const wire = hostErrorWire(new ApprovalDenied(member, reason));
    this.#grow(wire.length);
    entry.result = { kind: "error", wire, handles: false };
    trace.outcome = "denied";
    trace.resultBytes = wire.length;
    this.#options.onSettled?.();
    return { kind: "error", wire };
  }

  /** Runs the call on the host: its outcome is recorded (when a promise settles, then) and traced. */
  #run(
    entry: LogEntry,
    index: number,
    line: number | undefined,
    trace: HostCallRecord,
    run: () => HostOutcome,
    rerun?: NonNullable<LogEntry["result"]>,
  ): HostOutcome {
    entry.origin = this.#options.origin;
    const started = performance.now();
    const span: Span = tracer().startSpan(
      `moss.call ${entry.key}`,
      { attributes: { "moss.member": entry.key, "moss.args_bytes": entry.args.length } },
      this.#options.traceContext,
    );
    const finish = (kind: "value" | "error", wire: string, settledLater: boolean) => {
      entry.result = {
        kind: settledLater ? (kind === "value" ? "promise-value" : "promise-error") : kind,
        wire,
        handles: holdsHandles(wire),
      };
      this.#grow(wire.length);
      trace.outcome = kind;
      trace.durationMs = performance.now() - started;
      trace.resultBytes = wire.length;
      // A call run again (its logged result held another runtime's handles) must answer as it did: the same data,
      // as many handles. Its handles then denote what the logged ones did, by position.
      if (rerun !== undefined && (rerun.kind !== entry.result.kind || !sameData(rerun.wire, wire))) {
        this.#divergeAt(index, line, `${entry.key}, run again, answered otherwise than it did before`);
      }
      this.#learn(index, entry.key, wire);
      this.#options.onSettled?.();
      span.setAttribute("moss.result_bytes", wire.length);
      if (kind === "error") span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    };
    const outcome = run();
    if (outcome.kind === "value" || outcome.kind === "error") {
      finish(outcome.kind, outcome.wire, false);
      return outcome;
    }
    if (outcome.kind !== "promise") {
      span.end();
      return outcome;
    }
    return {
      kind: "promise",
      settled: outcome.settled.then((settled) => {
        finish(settled.kind, settled.wire, true);
        return settled;
      }),
    };
  }
}

/** Whether a wire text holds a host handle (a node `["H", shape]`). */
function holdsHandles(wire: string): boolean {
  if (!wire.includes('["H",')) return false;
  try {
    return (JSON.parse(wire) as unknown[]).some((node) => Array.isArray(node) && node[0] === "H");
  } catch {
    return true;
  }
}

function errorOutcome(error: Error): HostOutcome {
  return { kind: "error", wire: hostErrorWire(error) };
}

/** A logged result, answered the way the call was first answered (at once, or through a promise). */
function replayedOutcome(result: NonNullable<LogEntry["result"]>): HostOutcome {
  if (result.kind === "value" || result.kind === "error") return { kind: result.kind, wire: result.wire };
  const kind = result.kind === "promise-value" ? "value" : "error";
  return { kind: "promise", settled: Promise.resolve({ kind, wire: result.wire }) };
}

/** Whether two wire texts hold the same data, handles compared by kind only (what they denote is compared apart). */
function sameData(a: string, b: string): boolean {
  if (a === b) return true;
  if (!a.includes('["H",') || !b.includes('["H",')) return false;
  const left = handleSkeleton(a);
  const right = handleSkeleton(b);
  return left !== undefined && right !== undefined && left.text === right.text;
}

/** A wire's data with its handles left out (by kind), and the handle ids in the order they appear. */
function handleSkeleton(wire: string): { text: string; ids: number[] } | undefined {
  const ids: number[] = [];
  try {
    const text = encodeWire(
      decodeWire(wire, {
        onHandle: (shape) => {
          ids.push(Number(shape.id));
          return `[handle ${shape.kind}]`;
        },
      }),
    );
    return { text, ids };
  } catch {
    return undefined;
  }
}
