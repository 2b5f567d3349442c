import { type Context, trace as otelTrace, type Span, SpanStatusCode } from "@opentelemetry/api";
import {
  type CallbackOperation,
  encodeWire,
  type HandleOperation,
  type HostMembrane,
  type HostOutcome,
  hostErrorWire,
  unknownCallSiteReason,
} from "../membrane/index.ts";
import type { Nondeterminism } from "../sandbox/index.ts";
import type { Answers, CallPolicy, HostCallRecord, PendingRequest, TracePayloads } from "../types.ts";
import { CallDecisions, type Decision, type Verdict } from "./call-decision.ts";
import { Denotations } from "./denotations.ts";
import { handleSkeleton, holdsHandles, sameData } from "./handle-wire.ts";
import type { CallTarget, HandleMembrane } from "./host-membrane.ts";
import {
  errorOutcome,
  journalError,
  replayedOutcome,
  runNow,
  settledOf,
  stoppedError,
} from "./host-outcome.ts";
import { ApprovalDenied, type LogEntry, requestId } from "./log-entry.ts";
import { type RunSignal, withRunSignal } from "./run-signal.ts";
import { TracePayloadRecorder } from "./trace-payload.ts";

/*
 * The run log: every host call a run makes passes through here. A call is answered from the log when a resumed run
 * replays it, decided (allow, deny, ask) when it is new, run on the host and recorded when allowed, and traced in
 * `execution.calls` and OpenTelemetry spans either way.
 */

/** Most clock (and most random) values a checkpoint keeps, as the isolate logs at most this many per kind. */
const MAX_NONDETERMINISM_VALUES = 100_000;

/** The snippet's 1-based line and column (0: unknown) of a call site in the running script (see `callSiteOf`). */
export type PositionOf = (site: number) => SnippetPosition | undefined;

/** A position in the model's code: 1-based line, 1-based column (0 when only the line is known). */
export interface SnippetPosition {
  line: number;
  column: number;
}

export interface RunLogOptions {
  membrane: HandleMembrane;
  /** The log of the run being resumed (empty for a new run). */
  replay: readonly LogEntry[];
  answers: Answers;
  /** The host's policies (the compiler's, then the module's `__moss_policy__`): the strictest verdict decides. */
  policies: readonly CallPolicy[];
  positionOf: PositionOf;
  /**
   * The lines of the model's code around a call's position, a caret under its column when known: made only for a
   * request a person reads.
   */
  frameOf: (at: SnippetPosition) => string;
  /** Identifies the runtime (its membrane's handles). */
  origin: string;
  /** This run's part of every request id it makes (see {@link requestId}); kept in its continuation. */
  requestTag: string;
  /** Whether a call may wait for a person; when false, such a call is denied with this reason. */
  canPause: boolean | string;
  /** The OpenTelemetry context of the run's span: each host call's span is its child. */
  traceContext?: Context;
  /** How many bytes (arguments, results, requests) the kept log may hold; past it the run can no longer pause. */
  maxLogBytes: number;
  /** Called each time a new call of the kept log gets its result (or its denial): a journal may store the log. */
  onSettled?: () => void;
  /**
   * Called when a new call is about to run on the host, with the call already in the log as `started`: a journal
   * stores the log. A call that answers with a Promise runs once the Promise this returns settles (the journal
   * knows it may have run before it runs); one that answers at once cannot wait.
   */
  onStarted?: () => Promise<unknown> | undefined;
  /**
   * The end of the run this log belongs to: every call runs on the host with `currentRunSignal()` set to it, and a
   * call that had not started when the run ended (a policy's or a journal's later yes) never starts.
   */
  runSignal?: RunSignal;
  /** The run's stop signal: once it aborted, no host call starts (each fails with MossError `run-stopped`). */
  signal?: AbortSignal;
  /** Whether the trace keeps each call's arguments and result (bounded, redacted; see `TracePayloadRecorder`). */
  tracePayloads?: TracePayloads;
}

/** moss-ts's tracer: a no-op unless the host registered an OpenTelemetry tracer provider. */
export const tracer = () => otelTrace.getTracer("moss-ts");

/** The membrane of one run: replays, decides, records and traces every host call. */
export class RunLog implements HostMembrane {
  readonly #options: RunLogOptions;
  /** The new log: replayed entries, then what this run did. */
  readonly entries: LogEntry[] = [];
  readonly calls: HostCallRecord[] = [];
  /** Requests this run waits for. */
  readonly requests: PendingRequest[] = [];
  /** Warnings for the execution: policies that failed to decide (their calls were denied). */
  readonly warnings: string[] = [];
  /**
   * Function and class handles a person approved handing to host code, while the approved call that received them
   * runs (until its promise settles): how many such calls hold each.
   */
  readonly #approvedCallbacks = new Map<number, number>();
  /** Entries of host code's calls of callbacks: traced, never logged (nor counted in the log's size). */
  readonly #unlogged = new WeakSet<LogEntry>();
  /** The call site (see `callSiteOf`) of the code's call in progress: host code's calls of callbacks happen on it. */
  #site = 0;
  /** The first difference from the replayed log, when the run left it. */
  diverged: string | undefined;
  /** Calls made so far (the index of the next one in the log). */
  #count = 0;
  /** What the handles of this run denote (see `Denotations`). */
  readonly #denotations: Denotations;
  /** Decides each new call (see `CallDecisions`). */
  readonly #decisions: CallDecisions;
  /** Keeps the calls' payloads in the trace, when the runtime was asked to. */
  readonly #payloads: TracePayloadRecorder | undefined;
  /** Bytes the kept log holds. */
  #logBytes = 0;
  /** Entries whose call was handed to the host (run for real) in this run. */
  readonly #dispatched = new WeakSet<LogEntry>();
  /** The clock and random values the run read before its latest host call, in order (see `readValues`). */
  readonly nondeterminism: Nondeterminism = { clock: [], random: [] };
  /**
   * Why the log is no longer kept: model code sent or received more than `maxLogBytes` through host calls (every
   * argument and result of a run that can pause is kept for its continuation, so a loop of large calls or thousands
   * of large `moss.ask` questions filled the host's memory, and a pause made a continuation of hundreds of MB).
   */
  overflowed: string | undefined;

  constructor(options: RunLogOptions) {
    this.#options = options;
    this.#denotations = new Denotations(options.membrane, options.origin);
    this.#decisions = new CallDecisions(options.policies, options.membrane, this.#denotations, this.warnings);
    const payloads = options.tracePayloads ?? false;
    this.#payloads =
      payloads === false
        ? undefined
        : new TracePayloadRecorder(payloads, (handle) => this.#denotations.describe(handle));
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

  /** Takes the clock and random values the isolate read since its previous host call (malformed ones are dropped). */
  readValues(text: string): void {
    let given: { clock?: unknown; random?: unknown };
    try {
      given = JSON.parse(text) as typeof given;
    } catch {
      return;
    }
    const take = (values: unknown, into: number[]) => {
      if (!Array.isArray(values)) return;
      for (const value of values) {
        if (typeof value !== "number" || into.length >= MAX_NONDETERMINISM_VALUES) return;
        into.push(value);
      }
    };
    take(given?.clock, this.nondeterminism.clock);
    take(given?.random, this.nondeterminism.random);
  }

  /**
   * The log as a checkpoint carries it: every kept entry, those handed to the host and still without a result
   * marked `started` (they may have run).
   */
  checkpointLog(): LogEntry[] {
    return this.entries.map((entry) =>
      entry.result === undefined && entry.request === undefined && this.#dispatched.has(entry)
        ? { ...entry, started: true }
        : entry,
    );
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
    operation: HandleOperation,
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
    return this.#record(target, handle, key, args, scriptLine, (line) =>
      this.#decisions.ofHandle(operation, target, handle, args, line, run),
    );
  }

  /**
   * Host code calling (or constructing) a function or class handle it received in a call's arguments: decided here
   * like a call of the code's own, traced, never logged (its effects replay with the call that received it). It
   * cannot wait for a person inside another call: it runs on a need for approval only when a person approved the
   * call that handed it over, and is denied otherwise.
   */
  callback(operation: CallbackOperation, handle: number, args: string): HostOutcome {
    const membrane = this.#options.membrane;
    const run = () =>
      operation === "call" ? membrane.call(handle, null, args) : membrane.construct(handle, args);
    const target = membrane.describe(operation, handle, null);
    if (target === undefined) return run();
    const key = `${target.service === undefined ? "" : `${target.service}.`}${target.member} (called by host code)`;
    const line = this.#site > 0 ? this.#options.positionOf(this.#site)?.line : undefined;
    const trace: HostCallRecord = {
      member: key,
      ...(line === undefined ? { lineUnknown: unknownCallSiteReason(this.#site) } : { line }),
      outcome: "value",
      durationMs: 0,
      argsBytes: args.length,
    };
    this.calls.push(trace);
    this.#payloads?.args(trace, args);
    const entry: LogEntry = { key, args };
    this.#unlogged.add(entry);
    const act = (verdict: Verdict): HostOutcome => {
      if (verdict.kind === "deny")
        return this.#deny(entry, trace, target.member, verdict.reason, target.sync);
      if (verdict.kind === "ask" && !this.#approvedCallbacks.has(handle)) {
        const reason =
          "host code called it inside another call, where the run cannot wait for a person (approve the call that hands it over)";
        return this.#deny(entry, trace, target.member, reason, target.sync);
      }
      return this.#run(entry, this.#count - 1, line, trace, run);
    };
    const verdict = this.#decisions.verdict(target, args, line, handle);
    if (!(verdict instanceof Promise)) return act(verdict);
    const later = verdict.then((decided): Decision => ({ kind: "run", run: () => act(decided) }));
    return this.#whenDecided(later, target, entry, trace, (decision) =>
      decision.kind === "run" ? decision.run() : errorOutcome(new Error("the call was not decided")),
    );
  }

  /** Runs an approved call; host code may use the functions and classes it was handed while the call runs. */
  #approvedWhile(handed: readonly number[], run: () => HostOutcome): HostOutcome {
    if (handed.length === 0) return run();
    const counts = this.#approvedCallbacks;
    for (const id of handed) counts.set(id, (counts.get(id) ?? 0) + 1);
    const release = () => {
      for (const id of handed) {
        const left = (counts.get(id) ?? 1) - 1;
        if (left > 0) counts.set(id, left);
        else counts.delete(id);
      }
    };
    let outcome: HostOutcome;
    try {
      outcome = run();
    } catch (error) {
      release();
      throw error;
    }
    if (outcome.kind !== "promise") {
      release();
      return outcome;
    }
    return {
      kind: "promise",
      settled: outcome.settled.then(
        (settled) => {
          release();
          return settled;
        },
        (error: unknown) => {
          release();
          throw error;
        },
      ),
    };
  }

  /**
   * Acts on a decision; one a policy gives later is awaited when the call answers with a Promise anyway. A call that
   * answers at once cannot wait for it: it is denied (fail closed), with a warning.
   */
  #whenDecided(
    decision: Decision | Promise<Decision>,
    target: CallTarget,
    entry: LogEntry,
    trace: HostCallRecord,
    act: (decision: Decision) => HostOutcome,
  ): HostOutcome {
    if (!(decision instanceof Promise)) return act(decision);
    if (target.sync) {
      void decision.catch(() => {});
      const reason = "the host's policy answered with a Promise, and this member answers at once";
      this.warnings.push(
        `a call policy answered with a Promise for ${entry.key}, which returns a plain value (not a Promise): the call cannot wait for it and was denied`,
      );
      return this.#deny(entry, trace, target.member, reason, true);
    }
    return {
      kind: "promise",
      settled: decision.then(
        (decided) => settledOf(act(decided)),
        () => settledOf(this.#deny(entry, trace, target.member, "the host's policy did not decide it", true)),
      ),
    };
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
    decide: (line: number | undefined) => Decision | Promise<Decision>,
  ): HostOutcome {
    if (this.diverged !== undefined)
      return { kind: "refuse", failure: "replay-diverged", message: this.diverged };
    const index = this.#count++;
    this.#site = scriptLine;
    const at = scriptLine > 0 ? this.#options.positionOf(scriptLine) : undefined;
    const line = at?.line;
    const trace: HostCallRecord = {
      member: key,
      ...(line === undefined ? { lineUnknown: unknownCallSiteReason(scriptLine) } : { line }),
      outcome: "value",
      durationMs: 0,
      argsBytes: args.length,
    };
    this.calls.push(trace);
    this.#payloads?.args(trace, args);
    const ids = args.includes('["H",') ? (handleSkeleton(args)?.ids ?? []) : [];
    const denoted = {
      ...(handle === undefined ? {} : { on: this.#denotations.denote(handle).denotes }),
      ...(ids.length === 0 ? {} : { handles: ids.map((id) => this.#denotations.denote(id).denotes) }),
    };
    const logged = this.#options.replay[index];
    if (logged !== undefined) {
      const differs =
        logged.key !== key
          ? "where the log has"
          : !this.#denotations.denotesAll(
                logged.on === undefined ? [] : [logged.on],
                handle === undefined ? [] : [handle],
              )
            ? "on another object than"
            : !this.#denotations.denotesAll(logged.handles ?? [], ids) || !sameData(logged.args, args)
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
        const answer = logged.request === undefined ? undefined : this.#options.answers[logged.request.id];
        if (answer !== undefined && "approved" in answer)
          trace.approval = answer.approved ? "approved" : "denied";
        this.#denotations.learn(index, key, logged.result.wire);
        // After `learn`: host objects of the result read as what they now denote.
        this.#payloads?.result(
          trace,
          logged.result.kind.endsWith("error") ? "error" : "value",
          logged.result.wire,
        );
        return replayedOutcome(logged.result);
      }
      if (logged.request !== undefined && logged.result === undefined) {
        return this.#answered(logged, index, key, args, denoted, trace, () => decide(line), target);
      }
      if (logged.started === true && logged.result === undefined && !target.idempotent) {
        // The call may have run before its worker died: it runs again only on a person's yes.
        const entry: LogEntry = { key, args, ...denoted, origin: this.#options.origin };
        this.#keep(entry);
        // Never run from here: a yes decides the call afresh when the run resumes (see `#answered`).
        const run = () => errorOutcome(new Error(`${key} may have run already: it waits for a person's yes`));
        return this.#act(
          { kind: "pending-approval", reason: "in-doubt", run },
          target,
          handle,
          entry,
          trace,
          index,
          at,
          args,
          undefined,
        );
      }
      // A result holding host objects of another runtime: the call runs again here to make them (see README).
    }
    const rerun = logged?.result?.handles ? logged.result : undefined;
    const entry: LogEntry = { key, args, ...denoted, origin: this.#options.origin };
    this.#keep(entry);
    return this.#whenDecided(decide(line), target, entry, trace, (decision) =>
      this.#act(decision, target, handle, entry, trace, index, at, args, rerun),
    );
  }

  /** A new call, decided: it runs, is denied, or waits for a person (a request of this run). */
  #act(
    decision: Decision,
    target: CallTarget,
    handle: number | undefined,
    entry: LogEntry,
    trace: HostCallRecord,
    index: number,
    at: SnippetPosition | undefined,
    args: string,
    rerun: NonNullable<LogEntry["result"]> | undefined,
  ): HostOutcome {
    const line = at?.line;
    if (decision.kind === "denied")
      return this.#deny(entry, trace, target.member, decision.reason, target.sync);
    if (decision.kind === "run")
      return this.#run(entry, index, line, trace, decision.run, rerun, target.sync);
    if (this.#options.canPause !== true || this.overflowed !== undefined) {
      const reason =
        this.overflowed ??
        (typeof this.#options.canPause === "string" ? this.#options.canPause : "this run cannot pause");
      return this.#deny(entry, trace, target.member, reason, target.sync);
    }
    const site =
      at === undefined
        ? { lineUnknown: trace.lineUnknown ?? unknownCallSiteReason(0) }
        : { line: at.line, code: this.#options.frameOf(at) };
    const request: PendingRequest =
      decision.kind === "pending-ask"
        ? {
            id: requestId(index, this.#options.requestTag),
            kind: "clarification",
            question: decision.question,
            ...(Array.isArray(decision.choices) ? { choices: decision.choices as string[] } : {}),
            ...site,
          }
        : {
            id: requestId(index, this.#options.requestTag),
            kind: "approval",
            ...(target.service === undefined ? {} : { service: target.service }),
            member: target.member,
            ...(handle === undefined ? {} : { target: this.#denotations.describe(handle) }),
            args: this.#denotations.argumentsAsData(args),
            ...target.about?.(),
            ...handlesField(this.#denotations.handlesOf(args)),
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
    decide: () => Decision | Promise<Decision>,
    target: CallTarget,
  ): HostOutcome {
    const sync = target.sync;
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
      this.#payloads?.result(trace, "value", outcome.wire);
      this.#options.onSettled?.();
      return { kind: "promise", settled: Promise.resolve(outcome) };
    }
    const member = request.kind === "approval" ? request.member : key;
    if ("approved" in answer) trace.approval = answer.approved ? "approved" : "denied";
    if ("approved" in answer && answer.approved) {
      const handed = args.includes('["H",') ? (handleSkeleton(args)?.ids ?? []) : [];
      // Decided again: a policy that now denies (or fails) still wins over the person's yes.
      return this.#whenDecided(decide(), target, entry, trace, (decision) =>
        decision.kind === "pending-approval" || decision.kind === "run"
          ? this.#run(
              entry,
              index,
              undefined,
              trace,
              () => this.#approvedWhile(handed, decision.run),
              undefined,
              sync,
            )
          : this.#deny(entry, trace, member, decision.kind === "denied" ? decision.reason : "denied", sync),
      );
    }
    const reason =
      "approved" in answer && !answer.approved && answer.reason ? answer.reason : "denied by a person";
    return this.#deny(entry, trace, member, reason, sync);
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

  /**
   * The call is refused: `ApprovalDenied`, thrown where the member answers at once (`sync`), else the rejection of
   * the Promise it returns, so siblings of a `Promise.allSettled` go on.
   */
  #deny(entry: LogEntry, trace: HostCallRecord, member: string, reason: string, sync: boolean): HostOutcome {
    const wire = hostErrorWire(new ApprovalDenied(member, reason));
    if (!this.#unlogged.has(entry)) this.#grow(wire.length);
    entry.result = { kind: sync ? "error" : "promise-error", wire, handles: false };
    trace.outcome = "denied";
    trace.resultBytes = wire.length;
    this.#payloads?.result(trace, "error", wire);
    this.#options.onSettled?.();
    return sync
      ? { kind: "error", wire }
      : { kind: "promise", settled: Promise.resolve({ kind: "error", wire }) };
  }

  /**
   * The one place a call of the run starts on the host, whenever it starts (at once, or after a policy's or a
   * journal's promise): within the run's signal, and never once the run has ended (nobody awaits it any more).
   */
  #withinRun(run: () => HostOutcome, sync: boolean): () => HostOutcome {
    const signal = this.#options.runSignal;
    if (signal === undefined) return run;
    return () => {
      if (!signal.ended) return withRunSignal(signal, run);
      const wire = hostErrorWire(new Error("the run ended before this call started: it did not run"));
      return sync
        ? { kind: "error", wire }
        : { kind: "promise", settled: Promise.resolve({ kind: "error", wire }) };
    };
  }

  /** Runs the call on the host: its outcome is recorded (when a promise settles, then) and traced. */
  #run(
    entry: LogEntry,
    index: number,
    line: number | undefined,
    trace: HostCallRecord,
    run: () => HostOutcome,
    rerun?: NonNullable<LogEntry["result"]>,
    sync = true,
  ): HostOutcome {
    run = this.#withinRun(run, sync);
    entry.origin = this.#options.origin;
    const signal = this.#options.signal;
    if (signal?.aborted) run = () => errorOutcome(stoppedError(signal));
    // The journal learns the call started before it runs (when the call can wait for that): a takeover then knows.
    // A call whose "started" the journal could not store does not run, nor one whose run was stopped meanwhile.
    let journaled: Promise<unknown> | undefined;
    if (!this.#unlogged.has(entry) && this.entries.includes(entry)) {
      this.#dispatched.add(entry);
      journaled = this.#options.onStarted?.();
    }
    if (journaled !== undefined && !sync) {
      const later = run;
      run = () => ({
        kind: "promise",
        settled: journaled.then(
          () => (signal?.aborted ? errorOutcome(stoppedError(signal)) : runNow(later)()),
          (error: unknown) => errorOutcome(journalError(error)),
        ),
      });
    }
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
      if (!this.#unlogged.has(entry)) this.#grow(wire.length);
      trace.outcome = kind;
      trace.durationMs = performance.now() - started;
      trace.resultBytes = wire.length;
      // A call run again (its logged result held another runtime's handles) must answer as it did: the same data,
      // as many handles. Its handles then denote what the logged ones did, by position.
      if (rerun !== undefined && (rerun.kind !== entry.result.kind || !sameData(rerun.wire, wire))) {
        this.#divergeAt(index, line, `${entry.key}, run again, answered otherwise than it did before`);
      }
      // Host code's calls of callbacks answer host code: what they return is no result of model code's call `index`.
      if (!this.#unlogged.has(entry)) this.#denotations.learn(index, entry.key, wire);
      this.#payloads?.result(trace, kind, wire);
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
        if (settled.kind === "pending") return settled;
        finish(settled.kind, settled.wire, true);
        return settled;
      }),
    };
  }
}

function handlesField(handles: Record<number, string> | undefined): { handles?: Record<number, string> } {
  return handles === undefined ? {} : { handles };
}
