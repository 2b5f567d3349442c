import type { CallPolicy, PolicyCall, PolicyVerdict } from "../types.ts";

/** What the host's policies decided for one call; `warning` names a policy that failed to decide (it denies). */
export interface PolicyOutcome {
  verdict: PolicyVerdict;
  warning?: string;
}

const VERDICTS: ReadonlySet<unknown> = new Set(["allow", "deny", "ask"]);
const STRICTNESS: Record<PolicyVerdict, number> = { allow: 0, ask: 1, deny: 2 };

/**
 * Decides a call with every policy and keeps the strictest verdict (deny over ask over allow). Policies fail closed:
 * a verdict that is not `allow`, `deny` or `ask` (undefined, any other value, a throw, a rejected promise) denies
 * and is named in a warning. Synchronous while every policy answers synchronously; a promise once one answers with
 * one (it is awaited).
 */
export function decideByPolicies(
  policies: readonly CallPolicy[],
  call: PolicyCall,
): PolicyOutcome | Promise<PolicyOutcome> {
  const given: unknown[] = policies.map((policy) => {
    try {
      const verdict: unknown = policy(call);
      // A thenable (of any realm) becomes a Promise of this one; a `then` that throws becomes its rejection.
      return isThenable(verdict) ? Promise.resolve(verdict) : verdict;
    } catch (error) {
      return new PolicyFailure(`threw ${describeThrown(error)}`);
    }
  });
  if (!given.some((verdict) => verdict instanceof Promise)) return strictest(given, call);
  return Promise.all(
    given.map((verdict) =>
      verdict instanceof Promise
        ? verdict.then(
            (settled: unknown) => settled,
            (error: unknown) => new PolicyFailure(`rejected with ${describeThrown(error)}`),
          )
        : verdict,
    ),
  ).then((settled) => strictest(settled, call, true));
}

class PolicyFailure {
  constructor(readonly what: string) {}
}

function strictest(verdicts: readonly unknown[], call: PolicyCall, awaited = false): PolicyOutcome {
  let verdict: PolicyVerdict = "allow";
  for (const given of verdicts) {
    if (!VERDICTS.has(given)) {
      const what = given instanceof PolicyFailure ? given.what : `answered ${describeVerdict(given)}`;
      return {
        verdict: "deny",
        warning: `a call policy ${what} for ${callName(call)}${awaited ? " (awaited)" : ""}, not "allow", "deny" or "ask": the call was denied`,
      };
    }
    if (STRICTNESS[given as PolicyVerdict] > STRICTNESS[verdict]) verdict = given as PolicyVerdict;
  }
  return { verdict };
}

function callName(call: PolicyCall): string {
  return `${call.service === undefined ? "" : `${call.service}.`}${call.member}${call.line === undefined ? "" : ` (line ${call.line})`}`;
}

function describeVerdict(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (value === null || typeof value !== "object") return String(value);
  return Array.isArray(value) ? "an array" : "an object";
}

function describeThrown(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message.slice(0, 200)}`;
  return describeVerdict(error);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}
