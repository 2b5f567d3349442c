import type { HandleOperation, HostOutcome } from "../membrane/index.ts";
import type { CallPolicy } from "../types.ts";
import { decideByPolicies, type PolicyOutcome } from "./call-policy.ts";
import type { Denotations } from "./denotations.ts";
import { handleSkeleton } from "./handle-wire.ts";
import type { CallTarget, HandleMembrane } from "./host-membrane.ts";
import { thenOrNow } from "./host-outcome.ts";

/** What becomes of a new call: it runs, waits for a person (an approval, an answer), or is denied. */
export type Decision =
  | { kind: "run"; run: () => HostOutcome }
  | { kind: "pending-approval"; reason: "tag" | "policy" | "in-doubt"; run: () => HostOutcome }
  | { kind: "pending-ask"; question: string; choices: unknown }
  | { kind: "denied"; reason: string };

/** What the policies and the declaration say of a call (a policy may answer later, with a promise). */
export type Verdict =
  | { kind: "allow" }
  | { kind: "deny"; reason: string }
  | { kind: "ask"; reason: "tag" | "policy" };

/**
 * The one place a host call from model code is decided, for one run: the host's policies (the compiler's, then the
 * module's `__moss_policy__`; the strictest verdict decides, failing closed), then the declaration's `@approval`.
 */
export class CallDecisions {
  readonly #policies: readonly CallPolicy[];
  readonly #membrane: HandleMembrane;
  readonly #denotations: Denotations;
  /** The run's warnings: policies that failed to decide (their calls were denied). */
  readonly #warnings: string[];

  constructor(
    policies: readonly CallPolicy[],
    membrane: HandleMembrane,
    denotations: Denotations,
    warnings: string[],
  ) {
    this.#policies = policies;
    this.#membrane = membrane;
    this.#denotations = denotations;
    this.#warnings = warnings;
  }

  /** What becomes of a call, read or construction of a handle: `run` runs it when it is allowed. */
  ofHandle(
    operation: HandleOperation,
    target: CallTarget,
    handle: number,
    args: string,
    line: number | undefined,
    run: () => HostOutcome,
  ): Decision | Promise<Decision> {
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
    const carried = handed.some(({ callback }) => callback.approval) ? { ...target, approval: true } : target;
    const verdict = this.verdict(carried, args, line, handle);
    const withHanded = (decided: Verdict) =>
      decided.kind === "allow" ? this.#policiesAsk(handed, line) : decided;
    return verdict instanceof Promise
      ? verdict.then(withHanded).then(toDecision)
      : thenOrNow(withHanded(verdict), toDecision);
  }

  /**
   * The policies' strictest verdict (failing closed), then the declaration's `@approval`. A promise when a policy
   * answers with one. `handle` is the handle called: the policy reads what it denotes (`target`), and host objects in
   * the arguments as their descriptions.
   */
  verdict(
    target: CallTarget,
    args: string,
    line: number | undefined,
    handle: number | undefined,
  ): Verdict | Promise<Verdict> {
    const finish = (outcome: PolicyOutcome | undefined): Verdict => {
      if (outcome?.warning !== undefined) this.#warnings.push(outcome.warning);
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
    const policies = this.#policies;
    if (policies.length === 0) return finish(undefined);
    const outcome = decideByPolicies(policies, {
      service: target.service,
      member: target.member,
      args: this.#denotations.argumentsAsData(args),
      ...(handle === undefined ? {} : { target: this.#denotations.describe(handle) }),
      line,
    });
    return outcome instanceof Promise ? outcome.then(finish) : finish(outcome);
  }

  /** The functions and classes a call's arguments hand host code (their handles), as calls of them are named. */
  #handedOver(args: string): { handle: number; callback: CallTarget }[] {
    if (!args.includes('["H",')) return [];
    const handed: { handle: number; callback: CallTarget }[] = [];
    for (const handle of handleSkeleton(args)?.ids ?? []) {
      const callback = this.#membrane.handedOver(handle);
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
    const policies = this.#policies;
    if (handed.length === 0 || policies.length === 0) return { kind: "allow" };
    const outcomes = handed.map(({ handle, callback }) =>
      decideByPolicies(policies, {
        service: callback.service,
        member: callback.member,
        args: [],
        target: this.#denotations.describe(handle),
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
}
