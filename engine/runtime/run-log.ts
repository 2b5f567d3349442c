import { randomBytes } from "node:crypto";
import { type Context, trace as otelTrace, type Span, SpanStatusCode } from "@opentelemetry/api";
import { MossError } from "../errors.ts";
import {
  type CallbackOperation,
  decodeWire,
  encodeWire,
  type HandleOperation,
  type HostMembrane,
  type HostOutcome,
  hostErrorWire,
  type SettledOutcome,
  unknownCallSiteReason,
} from "../membrane/index.ts";
import type { Nondeterminism } from "../sandbox/index.ts";
import type { Answers, CallPolicy, HostCallRecord, PendingRequest } from "../types.ts";
import { decideByPolicies, type PolicyOutcome } from "./call-policy.ts";
import type { CallTarget, HandleMembrane } from "./host-membrane.ts";
import { type RunSignal, withRunSignal } from "./run-signal.ts";

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
  /**
   * The call had been dispatched to the host and had no result yet when the checkpoint was taken: it may have run.
   * A takeover runs it again only when its member is declared `@idempotent`; any other waits for a person's yes.
   */
  started?: true;
}

/** Most clock (and most random) values a checkpoint keeps, as the isolate logs at most this many per kind. */
const MAX_NONDETERMINISM_VALUES = 100_000;

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

/**
 * The id of the request call `index` of a run makes: `r<call>-<tag>`, the tag being 12 hex digits drawn at random
 * when the run first starts and kept in its continuation and checkpoints (a resumed or taken-over run names its
 * requests as before). So an id names one request of one run: another run, a later step, a server's next run of
 * the thread, each draws its own tag, and an answer given for one of them answers nothing else. A continuation made
 * before tags (no tag) keeps the bare `r<call>`.
 */
export function requestId(index: number, tag: string): string {
  return tag === "" ? `r${index + 1}` : `r${index + 1}-${tag}`;
}

/** A fresh tag for {@link requestId}: 48 random bits, as 12 hex digits. */
export function newRequestTag(): string {
  return randomBytes(6).toString("hex");
}

/** The snippet's 1-based line of a call site in the running script (see `callSiteOf`), when known. */
export type LineOf = (site: number) => number | undefined;

export interface RunLogOptions {
  membrane: HandleMembrane;
  /** The log of the run being resumed (empty for a new run). */
  replay: readonly LogEntry[];
  answers: Answers;
  /** The host's policies (the compiler's, then the module's `__moss_policy__`): the strictest verdict decides. */
  policies: readonly CallPolicy[];
  lineOf: LineOf;
  /** The lines of the model's code around a snippet line: made only for a request a person reads. */
  frameOf: (line: number) => string;
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
}

/** What becomes of a new call: it runs, waits for a person (an approval, an answer), or is denied. */
type Decision =
  | { kind: "run"; run: () => HostOutcome }
  | { kind: "pending-approval"; reason: "tag" | "policy" | "in-doubt"; run: () => HostOutcome }
  | { kind: "pending-ask"; question: string; choices: unknown }
  | { kind: "denied"; reason: string };

/** What a handle denotes in a run: the first thing found for it, everything found for it, and how a person reads it. */
interface Denotation {
  denotes: string;
  all: Set<string>;
  description: string;
}

/** What the policies and the declaration say of a call (a policy may answer later, with a promise). */
type Verdict =
  | { kind: "allow" }
  | { kind: "deny"; reason: string }
  | { kind: "ask"; reason: "tag" | "policy" };

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
    return this.#record(target, handle, key, args, scriptLine, (line) => {
      // Reads are not policy calls, but a read of an `@approval` member (a getter: host code runs) waits for a yes.
      if (operation === "get" && !target.approval) return { kind: "run", run };
      const toDecision = (verdict: Verdict): Decision => {
        if (verdict.kind === "ask") return { kind: "pending-approval", reason: verdict.reason, run };
        if (verdict.kind === "deny") return { kind: "denied", reason: verdict.reason };
        return { kind: "run", run };
      };
      if (operation === "get") return toDecision({ kind: "ask", reason: "tag" });
      // Handing host code a function or class whose use needs a person's yes asks for it here, where a run can wait.
      const handed = this.#handedOver(args);
      const carried = handed.some(({ callback }) => callback.approval)
        ? { ...target, approval: true }
        : target;
      const verdict = this.#decide(carried, args, line, handle);
      const withHanded = (decided: Verdict) =>
        decided.kind === "allow" ? this.#policiesAsk(handed, line) : decided;
      return verdict instanceof Promise
        ? verdict.then(withHanded).then(toDecision)
        : thenOrNow(withHanded(verdict), toDecision);
    });
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
    const line = this.#site > 0 ? this.#options.lineOf(this.#site) : undefined;
    const trace: HostCallRecord = {
      member: key,
      ...(line === undefined ? { lineUnknown: unknownCallSiteReason(this.#site) } : { line }),
      outcome: "value",
      durationMs: 0,
      argsBytes: args.length,
    };
    this.calls.push(trace);
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
    const verdict = this.#decide(target, args, line, handle);
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

  /** The functions and classes a call's arguments hand host code (their handles), as calls of them are named. */
  #handedOver(args: string): { handle: number; callback: CallTarget }[] {
    if (!args.includes('["H",')) return [];
    const membrane = this.#options.membrane;
    const handed: { handle: number; callback: CallTarget }[] = [];
    for (const handle of handleSkeleton(args)?.ids ?? []) {
      const callback = membrane.handedOver(handle);
      if (callback !== undefined) handed.push({ handle, callback });
    }
    return handed;
  }

  /**
   * Whether a policy asks for a function or class handed to host code (its arguments are not known yet: `[]`): the
   * call that hands it over then asks, since host code's own call of it cannot wait for a person. A policy's deny
   * or failure is left to the callback's own call, where it is decided with its arguments.
   */
  #policiesAsk(
    handed: readonly { handle: number; callback: CallTarget }[],
    line: number | undefined,
  ): Verdict | Promise<Verdict> {
    const policies = this.#options.policies;
    if (handed.length === 0 || policies.length === 0) return { kind: "allow" };
    const outcomes = handed.map(({ handle, callback }) =>
      decideByPolicies(policies, {
        service: callback.service,
        member: callback.member,
        args: [],
        target: this.#describe(handle),
        line,
      }),
    );
    const verdict = (settled: readonly PolicyOutcome[]): Verdict =>
      settled.some((outcome) => outcome.verdict === "ask" && outcome.warning === undefined)
        ? { kind: "ask", reason: "policy" }
        : { kind: "allow" };
    if (!outcomes.some((outcome) => outcome instanceof Promise)) return verdict(outcomes as PolicyOutcome[]);
    return Promise.all(outcomes).then(verdict, () => ({ kind: "allow" }) as const);
  }

  /**
   * The one place a host call from model code is decided: the policies' strictest verdict (failing closed), then
   * the declaration's `@approval`. A promise when a policy answers with one. `handle` is the handle called: the
   * policy reads what it denotes (`target`), and host objects in the arguments as their descriptions.
   */
  #decide(
    target: CallTarget,
    args: string,
    line: number | undefined,
    handle: number | undefined,
  ): Verdict | Promise<Verdict> {
    const finish = (outcome: PolicyOutcome | undefined): Verdict => {
      if (outcome?.warning !== undefined) this.warnings.push(outcome.warning);
      if (outcome?.verdict === "deny") {
        const reason =
          outcome.warning === undefined
            ? "denied by the host's policy"
            : "the host's policy did not decide it";
        return { kind: "deny", reason };
      }
      // `@approval` asks whatever the policy allows: the declaration promises a person sees every call.
      if (target.approval) return { kind: "ask", reason: "tag" };
      if (outcome?.verdict === "ask") return { kind: "ask", reason: "policy" };
      return { kind: "allow" };
    };
    const policies = this.#options.policies;
    if (policies.length === 0) return finish(undefined);
    const outcome = decideByPolicies(policies, {
      service: target.service,
      member: target.member,
      args: this.#argumentsAsData(args),
      ...(handle === undefined ? {} : { target: this.#describe(handle) }),
      line,
    });
    return outcome instanceof Promise ? outcome.then(finish) : finish(outcome);
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
    const line = scriptLine > 0 ? this.#options.lineOf(scriptLine) : undefined;
    const trace: HostCallRecord = {
      member: key,
      ...(line === undefined ? { lineUnknown: unknownCallSiteReason(scriptLine) } : { line }),
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
          line,
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
      this.#act(decision, target, handle, entry, trace, index, line, args, rerun),
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
    line: number | undefined,
    args: string,
    rerun: NonNullable<LogEntry["result"]> | undefined,
  ): HostOutcome {
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
      line === undefined
        ? { lineUnknown: trace.lineUnknown ?? unknownCallSiteReason(0) }
        : { line, code: this.#options.frameOf(line) };
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
      this.#options.onSettled?.();
      return { kind: "promise", settled: Promise.resolve(outcome) };
    }
    const member = request.kind === "approval" ? request.member : key;
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
          () => (signal?.aborted ? stoppedOutcome(stoppedError(signal)) : runNow(later)()),
          (error: unknown) => stoppedOutcome(journalError(error)),
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
      if (!this.#unlogged.has(entry)) this.#learn(index, entry.key, wire);
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

/** Whether a wire text holds a host handle (a node `["H", shape]`). */
function holdsHandles(wire: string): boolean {
  if (!wire.includes('["H",')) return false;
  try {
    return (JSON.parse(wire) as unknown[]).some((node) => Array.isArray(node) && node[0] === "H");
  } catch {
    return true;
  }
}

/** Applies `next` to a value now, or once a promise of it settles. */
function thenOrNow<T, U>(value: T | Promise<T>, next: (value: T) => U): U | Promise<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}

/** What a host promise settles to for an outcome decided later (a wait becomes `pending`: never delivered). */
function settledOf(outcome: HostOutcome): SettledOutcome | Promise<SettledOutcome> {
  if (outcome.kind === "value" || outcome.kind === "error") return outcome;
  if (outcome.kind === "promise") return outcome.settled;
  if (outcome.kind === "refuse") return { kind: "error", wire: hostErrorWire(new Error(outcome.message)) };
  return { kind: "pending" };
}

/** Runs a call whose start was journaled first: what it answers, as a host promise settles (a throw is its error). */
function runNow(run: () => HostOutcome): () => SettledOutcome | Promise<SettledOutcome> {
  return () => {
    try {
      return settledOf(run());
    } catch (error) {
      return { kind: "error", wire: hostErrorWire(error) };
    }
  };
}

/** Why a stopped run's call did not run. */
function stoppedError(signal: AbortSignal): MossError {
  const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? "aborted");
  return new MossError("run-stopped", `the run was stopped (${reason}): this call did not run`, {});
}

/** A call whose "started" the journal could not store: it did not run (a takeover would not know it may have). */
function journalError(error: unknown): MossError {
  const message = error instanceof Error ? error.message : String(error);
  return new MossError(
    "run-stopped",
    `the run's checkpoint could not be stored (${message}): this call did not run`,
    {},
  );
}

function stoppedOutcome(error: Error): SettledOutcome {
  return { kind: "error", wire: hostErrorWire(error) };
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
